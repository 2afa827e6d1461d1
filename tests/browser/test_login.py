"""The login form in Chromium: a wrong password is told, the right one lands where it was going.

The other browser tests start from a session made by the fixture (conftest.page_as); this one
is the form's own test.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from playwright.sync_api import Browser, expect

from tests.browser.conftest import PASSWORD


def test_the_form_refuses_a_wrong_password_then_signs_in_and_returns_to_the_page_asked_for(
    browser: Browser, live_url: str, users: dict[str, User]
) -> None:
    context = browser.new_context()
    page = context.new_page()
    try:
        page.goto(f"{live_url}/runs/")
        page.wait_for_url(f"{live_url}/accounts/login/?next=/runs/")  # pages need a login
        page.fill("input[name=username]", "operator")
        page.fill("input[name=password]", "not-the-password")
        page.click("button[type=submit]")
        expect(page.locator(".message.error")).to_contain_text("did not match")
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(f"{live_url}/runs/")
        expect(page.locator("h1")).to_contain_text("Runs")
    finally:
        context.close()
