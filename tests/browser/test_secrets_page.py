"""The secrets page in a real browser: admins set and replace values they never see again;
the page shows who changed what and which workflows use each; other roles have no page."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from tests.integration.conftest import publish
from workflows.store.models import AuditEntry, Secret

VALUE = "ghp_browserSecret_8842"


def test_an_admin_sets_a_secret_that_the_page_never_shows_again(
    page_as: Any, live_url: str, screenshot: Any
) -> None:
    page = page_as("admin")
    page.goto(f"{live_url}/secrets/")
    page.fill("input[name=name]", "GITHUB_TOKEN")
    page.fill("input[name=value]", VALUE)
    page.fill("input[name=description]", "CI bot")
    page.click("text=Save secret")
    row = page.locator("#secret-GITHUB_TOKEN")
    expect(row).to_contain_text("CI bot")
    expect(page.locator("input[name=value]")).to_have_value("")
    publish(
        "uses-token",
        {
            "nodes": [
                {
                    "id": "call",
                    "handler": "http.request",
                    "config": {
                        "url": "https://api.example.test/repos",
                        "headers": {"Authorization": "token {secret.GITHUB_TOKEN}"},
                    },
                }
            ],
            "edges": [],
        },
    )
    page.goto(f"{live_url}/secrets/?name=GITHUB_TOKEN#secret-form")
    expect(page.locator("input[name=name]")).to_have_value("GITHUB_TOKEN")
    page.fill("input[name=value]", VALUE + "-rotated")
    page.click("text=Save secret")
    expect(row.locator(".used-by")).to_contain_text("uses-token (active)")
    expect(row.locator(".history")).to_contain_text("secret.set r2")
    expect(row).to_contain_text("CI bot")
    screenshot(page, "secrets")
    assert VALUE not in page.content()
    assert Secret.objects.get(name="GITHUB_TOKEN").revision == 2
    assert AuditEntry.objects.filter(target_type="secret", target_id="GITHUB_TOKEN").count() == 2


def test_a_refused_name_is_told_beside_the_form_and_the_value_is_not_echoed(
    page_as: Any, live_url: str, screenshot: Any
) -> None:
    page = page_as("admin")
    page.goto(f"{live_url}/secrets/")
    page.evaluate("document.querySelector('input[name=name]').removeAttribute('pattern')")
    page.fill("input[name=name]", "bad name")
    page.fill("input[name=value]", VALUE)
    page.click("text=Save secret")
    expect(page.locator("#secret-error")).to_contain_text("name:")
    screenshot(page, "refused")
    assert VALUE not in page.content()
    assert not Secret.objects.exists()


def test_an_editor_has_no_secrets_page_and_no_link_to_it(page_as: Any, live_url: str) -> None:
    page = page_as("editor")
    expect(page.locator("nav.mainnav")).not_to_contain_text("Secrets")
    response = page.goto(f"{live_url}/secrets/")
    assert response is not None and response.status == 403
