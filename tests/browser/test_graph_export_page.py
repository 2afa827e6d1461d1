"""In a real browser: a workflow's graph exported from its live page and its versions page,
and an admin adding a provider of the Anthropic kind on the LLM page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect

from tests.integration.conftest import publish
from workflows.store.models import LLMProvider

FLOW = {
    "nodes": [
        {"id": "fetch", "handler": "core.echo"},
        {"id": "plan", "handler": "llm.agent", "config": {"prompt": "Plan {input.topic}"}},
        {"id": "skip", "handler": "core.noop"},
    ],
    "edges": [
        {"source": "fetch", "target": "plan", "when": 'output.kind == "deep"'},
        {"source": "fetch", "target": "skip", "when": 'output.kind != "deep"'},
    ],
}


def shots(page: Page, name: str) -> None:
    """Screenshots at 1280 and 800 px wide, in /tmp, to look at."""
    for width in (1280, 800):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=f"/tmp/{name}-{width}.png", full_page=False)
    page.set_viewport_size({"width": 1280, "height": 900})


def test_a_viewer_downloads_the_graph_as_mermaid_from_the_live_page(page_as: Any, live_url: str) -> None:
    publish("researcher", FLOW)
    page = page_as("viewer")
    page.goto(f"{live_url}/workflows/researcher/live/")
    menu = page.locator("details.export-menu")
    menu.locator("summary").click()
    expect(menu.get_by_role("menuitem")).to_have_count(2)
    shots(page, "export-menu-live")
    with page.expect_download() as downloading:
        menu.get_by_role("menuitem", name="Mermaid flowchart (.mmd) · v1").click()
    download = downloading.value
    assert download.suggested_filename == "researcher-v1.mmd"
    text = Path(download.path()).read_text()
    assert '    n1{{"plan<br/>agent: llm.agent"}}' in text
    assert '    n0 -->|"output.kind == #quot;deep#quot;"| n1' in text

    page.goto(f"{live_url}/workflows/researcher/history/")
    cell = page.locator('td[data-export="v1"]')
    with page.expect_download() as downloading:
        cell.get_by_role("link", name="DOT").click()
    dot = Path(downloading.value.path()).read_text()
    assert '"fetch" -> "plan" [label="output.kind == \\"deep\\""];' in dot
    shots(page, "export-history")


def test_an_admin_adds_an_anthropic_provider_on_the_llm_page(page_as: Any, live_url: str) -> None:
    page = page_as("admin")
    page.goto(f"{live_url}/llm/")
    form = page.locator("#provider-form form")
    form.locator("input[name=name]").fill("claude")
    form.locator("select[name=kind]").select_option("anthropic")
    form.locator("input[name=base_url]").fill("https://api.anthropic.com")
    form.locator("input[name=api_key]").fill("sk-ant-page-secret")
    form.locator("input[name=default_model]").fill("claude-sonnet-4-5")
    form.get_by_role("button", name="Save provider").click()
    row = page.locator("#provider-claude")
    expect(row.locator('[data-field="kind"]')).to_have_text("Anthropic")
    assert LLMProvider.objects.get(name="claude").kind == "anthropic"
    assert "sk-ant-page-secret" not in page.content()
    row.scroll_into_view_if_needed()
    shots(page, "llm-providers-table")
    page.goto(f"{live_url}/llm/?edit=claude#provider-form")
    expect(page.locator("select[name=kind]")).to_have_value("anthropic")
    shots(page, "llm-provider-kind")
