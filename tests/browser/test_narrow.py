"""At 800 px (issue 28, item 7): the editor's tools, Save, Publish and Start run are in reach,
and no page is wider than the window (a wide table scrolls inside its card)."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page, expect

from tests.browser.editor_fixtures import open_editor
from tests.factories import make_workflow
from tests.integration.conftest import wait_finished
from workflows.runs import actions as runs

WIDTH = 800
FLOW = {
    "nodes": [
        {"id": "fetch_the_customer_profile_first", "handler": "core.echo"},
        {"id": "then_fail_with_a_long_message", "handler": "core.fail", "config": {"message": "x" * 300}},
    ],
    "edges": [{"source": "fetch_the_customer_profile_first", "target": "then_fail_with_a_long_message"}],
}


def inside_window(page: Page, selector: str) -> None:
    """The element is on screen, within the window's width, and can be clicked there."""
    box = page.locator(selector).bounding_box()
    assert box is not None, f"{selector} is not shown"
    assert box["x"] >= 0 and box["x"] + box["width"] <= WIDTH, f"{selector} is off-screen: {box}"


def no_sideways_scroll(page: Page, where: str) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= WIDTH, f"{where} is {width} px wide at {WIDTH} px"


def test_the_editor_at_800_px_keeps_save_publish_and_start_run_in_reach(
    page_as: Any, live_url: str, screenshot: Any
) -> None:
    make_workflow("narrow-editor", FLOW, publish=True)
    page: Page = page_as("admin")
    page.set_viewport_size({"width": WIDTH, "height": 900})
    open_editor(page, live_url, "narrow-editor")
    for command in ("undo", "fit", "layout", "find", "export", "save", "publish", "start-run"):
        inside_window(page, f'.ed-bar [data-cmd="{command}"]')
    no_sideways_scroll(page, "the editor")
    canvas = page.locator("#editor .ed-canvas").bounding_box()
    assert canvas is not None and canvas["width"] >= 400, f"the canvas is squeezed: {canvas}"
    page.locator('.ed-node[data-id="fetch_the_customer_profile_first"]').click()
    expect(page.locator(".ed-side")).to_contain_text("fetch_the_customer_profile_first")
    inside_window(page, ".ed-side")
    page.fill("#ed-comment", "narrow")
    page.locator('.ed-node[data-id="fetch_the_customer_profile_first"]').click()
    screenshot(page, "editor-800")
    page.click('[data-cmd="start-run"]')
    screenshot(page, "editor-800-start-run")


def test_the_tables_at_800_px_stay_within_the_window(
    runtime: Any, page_as: Any, live_url: str, screenshot: Any
) -> None:
    workflow = make_workflow("narrow-tables", FLOW, publish=True)
    run, _ = runs.start_run(workflow, {"customer": "acme-with-a-rather-long-name", "order": {"total": 12}})
    assert wait_finished(run).status == "failed"
    page: Page = page_as("admin")
    page.set_viewport_size({"width": WIDTH, "height": 900})
    for path in ("/", "/runs/", f"/runs/{run.pk}/", "/dead-letters/", "/workers/", "/inbox/", "/workflows/"):
        page.goto(live_url + path)
        no_sideways_scroll(page, path)
        screenshot(page, "page" + path.replace("/", "-"))
    page.goto(f"{live_url}/runs/{run.pk}/")
    page.locator('#run-graph [data-node="then_fail_with_a_long_message"]').click()
    expect(page.locator("#node-detail .cardhead")).to_contain_text("then_fail_with_a_long_message")
    no_sideways_scroll(page, "the run page with a node open")
    screenshot(page, "run-node-800")
