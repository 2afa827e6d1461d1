"""The Content-Security-Policy (controlplane/csp.py) in Chromium: every page works under it,
the editor's and the dashboard's bundles included, and the browser reports no violation."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page, expect

from tests.browser.test_ops import chain, letter_of

# Every violation the browser reports (the event fires for inline code, eval, foreign origins).
RECORD_VIOLATIONS = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__csp.push(`${e.violatedDirective} blocked ${e.blockedURI || "inline"} (${e.sourceFile}:${e.lineNumber})`);
});
"""


def violations(page: Page) -> list[str]:
    return list(page.evaluate("window.__csp || []"))


def test_pages_work_under_the_policy_without_violations(page_as: Any, live_url: str, screenshot: Any) -> None:
    workflow = chain()
    letter = letter_of(workflow, "boom 1", {"u": 1})
    page = page_as("admin")
    page.context.add_init_script(RECORD_VIOLATIONS)
    console: list[str] = []
    page.on(
        "console",
        lambda m: console.append(f"{page.url}: {m.text}") if "Content Security Policy" in m.text else None,
    )
    found: dict[str, list[str]] = {}

    def visit(path: str) -> None:
        response = page.goto(f"{live_url}{path}")
        assert (
            response is not None
            and "script-src 'self' 'nonce-" in response.headers["content-security-policy"]
        )
        page.wait_for_load_state("networkidle")
        found[path] = violations(page)

    visit(f"/workflows/{workflow.slug}/")  # the editor: its ES module bundle and its layout worker
    expect(page.locator(".ed-node")).to_have_count(2)
    found["editor, drawn"] = violations(page)
    visit("/")  # the dashboard: htmx, live.js over the websocket, the charts bundle
    # /runs/ held a refresh by an hx-trigger filter, which htmx evaluates: now select.js holds it.
    for path in [
        "/runs/",
        f"/runs/{letter.run_id}/",
        f"/workflows/{workflow.slug}/live/",
        f"/dead-letters/{letter.pk}/",
        "/inbox/",
        "/workers/",
        "/keys/",
        "/retention/",
        "/llm/",
        f"/workflows/{workflow.slug}/schedules/",
        f"/workflows/{workflow.slug}/history/",
        "/admin/",
    ]:
        visit(path)
    visit("/api/v1/docs")  # its stylesheet inline with the nonce; Swagger UI's bundle
    expect(page.locator("#swagger-ui .opblock-tag").first).to_be_visible(timeout=60_000)  # a big document
    found["API docs, drawn"] = violations(page)
    assert {path: v for path, v in found.items() if v} == {}
    assert console == []
