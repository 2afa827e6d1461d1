"""The workflow editor in Chromium against a live Daphne, real workers and a scheduler.

Every scenario waits on what the page shows (Playwright's expect, with deadlines): the
editor marks `data-layout`, `data-validation`, `data-run` on #editor as it goes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.browser.editor_fixtures import (
    changed,
    click_edge,
    connect,
    drag,
    edge,
    layered_definition,
    node,
    open_editor,
    select_node,
    wait_ready,
)
from tests.factories import CHAIN, add_draft, make_workflow
from workflows.store.models import Run, Workflow

BUNDLE = Path(__file__).resolve().parents[2] / "static" / "editor" / "dist" / "editor.js"
PageAs = Callable[[str], Page]
Screenshot = Callable[[Page, str], Path]
DEMO_HANDLERS = [
    "demo.fetch_profile",
    "demo.enrich_location",
    "demo.sentiment_analysis",
    "demo.recommendation_engine",
]
DEMO_EDGES = [
    ("fetch_profile", "sentiment_analysis"),
    ("fetch_profile", "recommendation_engine"),
    ("enrich_location", "recommendation_engine"),
    ("sentiment_analysis", "recommendation_engine"),
]


@pytest.fixture(autouse=True)
def built_editor() -> None:
    if not BUNDLE.exists():
        pytest.fail("The editor is not built: run `make assets` (npm ci && npm run build) first.")


def test_build_the_demo_workflow_with_the_mouse_publish_and_run_it(
    page_as: PageAs, live_url: str, runtime: Any, screenshot: Screenshot
) -> None:
    page = page_as("editor")
    page.goto(f"{live_url}/workflows/")
    page.fill("#id_title", "Profile, drawn by hand")
    page.fill("#id_slug", "profile-by-hand")
    page.click("text=Create and open the editor")
    page.wait_for_url(f"{live_url}/workflows/profile-by-hand/")
    wait_ready(page)
    expect(page.locator(".ed-node")).to_have_count(0)

    for handler in DEMO_HANDLERS:
        page.click(f'.ed-palette-item[data-handler="{handler}"]')
    expect(page.locator(".ed-node")).to_have_count(4)
    page.click('[data-cmd="fit"]')
    for source, target in DEMO_EDGES:
        connect(page, source, target)
        expect(edge(page, source, target)).to_have_count(1)
    page.click('[data-cmd="layout"]')
    expect(page.locator("#ed-status")).to_contain_text("Laid out 4 nodes")

    select_node(page, "fetch_profile")
    join = page.get_by_label("join rule")  # choices, default and help from the engine's table
    expect(join).to_have_value("all_success")
    expect(join.locator("option")).to_have_text(["all_success", "any_success", "all_done"])
    expect(page.locator("#ed-inspect")).to_contain_text("Runs when every predecessor succeeded.")
    page.get_by_label("max attempts").fill("3")
    page.get_by_label("timeout (s)").fill("30")
    page.get_by_label("max in flight").fill("2")
    page.get_by_label("starts").fill("100")
    page.get_by_label("per (s)").fill("60")
    expect(page.locator("#ed-problems")).to_have_attribute("data-count", "0")
    page.fill("#ed-comment", "drawn with the mouse")
    page.click('[data-cmd="save"]')
    expect(page.locator("#ed-status")).to_contain_text("Saved as new draft v1")
    screenshot(page, "drawn")

    page.click('[data-cmd="publish"]')
    expect(page.locator("#ed-dialog")).to_contain_text(
        "Runs already in flight finish on the version they started with"
    )
    page.click("#ed-dialog-ok")
    expect(page.locator("#ed-status")).to_contain_text("runs in flight stay on the version they started with")
    expect(page.locator("#ed-version-label")).to_contain_text("v1 · published · active")

    page.click('[data-tab="testrun"]')
    page.fill("#ed-run-input", '{"user_id": "u-7"}')
    page.click("#ed-run-start")
    expect(page.locator("#editor")).to_have_attribute("data-run", "succeeded", timeout=30_000)
    expect(page.locator(".ed-node.run-succeeded")).to_have_count(4)
    screenshot(page, "run-succeeded")

    run = Run.objects.get(workflow__slug="profile-by-hand")
    assert (run.status, run.version.number, run.input) == ("succeeded", 1, {"user_id": "u-7"})
    stored = run.version.definition
    fetch = next(n for n in stored["nodes"] if n["id"] == "fetch_profile")
    assert (fetch["retry"]["max_attempts"], fetch["timeout_seconds"], fetch["max_in_flight"]) == (3, 30, 2)
    assert fetch["rate_limit"] == {"count": 100, "per_seconds": 60}
    assert {(e["source"], e["target"]) for e in stored["edges"]} == set(DEMO_EDGES)
    assert run.nodes.get(node_id="recommendation_engine").output["inputs"] == [
        "enrich_location",
        "fetch_profile",
        "sentiment_analysis",
    ]


def test_closing_a_cycle_is_refused_with_the_cycle_highlighted(
    page_as: PageAs, live_url: str, screenshot: Screenshot
) -> None:
    make_workflow("loop", CHAIN)
    page = page_as("editor")
    open_editor(page, live_url, "loop")
    with page.expect_response(lambda r: r.url.endswith("/api/v1/workflows/loop/validate")) as answer:
        connect(page, "c", "a")
    assert answer.value.json()["errors"][0]["cycle"] == ["a", "b", "c", "a"]  # structure, no parsing
    expect(page.locator(".ed-refusal")).to_contain_text("cycle: a -> b -> c -> a")
    expect(page.locator("#ed-status")).to_have_text("Connection c → a refused: cycle: a -> b -> c -> a")
    expect(page.locator(".ed-node.in-cycle")).to_have_count(3)
    expect(page.locator(".ed-edge.in-cycle")).to_have_count(2)
    expect(page.locator(".ed-draft-edge.ed-refused")).to_have_attribute("visibility", "visible")
    expect(page.locator(".ed-edge")).to_have_count(2)
    expect(page.locator('[data-cmd="save"]')).to_be_disabled()
    screenshot(page, "cycle-refused")


def test_a_conflicting_save_from_a_second_browser_is_refused(
    page_as: PageAs, live_url: str, screenshot: Screenshot
) -> None:
    workflow = make_workflow("shared", CHAIN)
    add_draft(workflow, CHAIN)
    first, second = page_as("editor"), page_as("admin")
    for page in (first, second):
        open_editor(page, live_url, "shared", version=2)

    select_node(first, "a")
    first.get_by_label("timeout (s)").fill("11")
    first.click('[data-cmd="save"]')
    expect(first.locator("#ed-status")).to_contain_text("Saved draft v2 (revision 2)")
    screenshot(first, "saved")

    select_node(second, "b")
    second.get_by_label("timeout (s)").fill("22")
    with second.expect_response(lambda r: r.request.method == "PUT") as answer:
        second.click('[data-cmd="save"]')
    assert answer.value.url.endswith("/api/v1/workflows/shared/versions/2")  # If-Match: the ETag read
    assert (answer.value.status, answer.value.headers["content-type"]) == (412, "application/problem+json")
    banner = second.locator("#ed-conflict")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("was changed by someone else (now revision 2)")
    expect(banner).to_contain_text("reload it and apply your change again")
    expect(second.locator("#ed-conflict-reload")).to_be_visible()
    expect(second.locator("#ed-status")).to_have_text("Not saved: someone else changed this version.")
    screenshot(second, "conflict")

    second.click("#ed-conflict-reload")
    second.click("#ed-dialog-ok")  # discard the unsaved change
    expect(banner).to_be_hidden()
    expect(second.locator("#ed-version-label")).to_contain_text("revision 2")
    draft = workflow.versions.get(number=2)
    a, b = draft.definition["nodes"][0], draft.definition["nodes"][1]
    assert (draft.revision, a["timeout_seconds"], b["timeout_seconds"]) == (2, 11, 300)


def test_diff_of_two_versions_highlights_the_changes(
    page_as: PageAs, live_url: str, screenshot: Screenshot
) -> None:
    workflow = make_workflow("compare", CHAIN)
    newer = changed(CHAIN, "b", timeout_seconds=9)
    newer["nodes"] = [n for n in newer["nodes"] if n["id"] != "c"] + [{"id": "d", "handler": "core.noop"}]
    newer["edges"] = [{"source": "a", "target": "b"}, {"source": "b", "target": "d"}]
    add_draft(workflow, newer)
    page = page_as("viewer")
    open_editor(page, live_url, "compare")
    page.click('[data-tab="versions"]')
    page.select_option('select[name="from"]', "1")
    page.select_option('select[name="to"]', "2")
    page.click("text=Show diff")
    page.wait_for_url("**/workflows/compare/diff/?from=1&to=2")
    expect(page.locator("#editor")).to_have_attribute("data-layout", "done")
    expect(page.locator('.ed-node.diff-added[data-id="d"]')).to_have_count(1)
    expect(page.locator('.ed-node.diff-removed[data-id="c"]')).to_have_count(1)
    expect(page.locator('.ed-node.diff-changed[data-id="b"]')).to_have_count(1)
    expect(
        page.locator('.ed-node[data-id="a"]:not(.diff-added):not(.diff-removed):not(.diff-changed)')
    ).to_have_count(1)
    expect(page.locator('.ed-edge.diff-added[data-source="b"][data-target="d"]')).to_have_count(1)
    expect(page.locator('.ed-edge.diff-removed[data-source="b"][data-target="c"]')).to_have_count(1)
    changes = page.locator("#ed-diff-list")
    expect(changes).to_contain_text("timeout_seconds")
    expect(changes.locator("ins")).to_have_text("9")
    expect(changes.locator("del")).to_have_text("300")
    screenshot(page, "diff")


def test_a_500_node_import_opens_and_is_laid_out(
    page_as: PageAs, live_url: str, screenshot: Screenshot, tmp_path: Path
) -> None:
    make_workflow("big", None)
    path = tmp_path / "big.json"
    path.write_text(json.dumps(layered_definition(500)))
    page = page_as("editor")
    open_editor(page, live_url, "big")
    page.set_input_files("#ed-import-file", str(path))
    expect(page.locator(".ed-node")).to_have_count(500)
    expect(page.locator("#ed-status")).to_contain_text("Laid out 500 nodes")
    expect(page.locator("#ed-problems")).to_have_attribute("data-count", "0")
    places = page.eval_on_selector_all(".ed-node", "els => els.map(e => e.getAttribute('transform'))")
    assert len(set(places)) == 500  # every node has a place of its own
    screenshot(page, "500-nodes-laid-out")
    for _ in range(10):
        page.click('[data-cmd="zoom-in"]')
    screenshot(page, "500-nodes-zoomed-in")
    before = page.locator(".ed-viewport").get_attribute("transform")
    box = page.locator("#ed-canvas").bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + 100, box["y"] + 100)
    page.mouse.down(button="middle")
    page.mouse.move(box["x"] + 300, box["y"] + 250, steps=10)
    page.mouse.up(button="middle")
    assert page.locator(".ed-viewport").get_attribute("transform") != before
    page.click('[data-cmd="save"]')
    expect(page.locator("#ed-status")).to_contain_text("Saved as new draft v1")
    assert len(Workflow.objects.get(slug="big").versions.get(number=1).definition["nodes"]) == 500


def test_a_viewer_can_look_but_not_change(page_as: PageAs, live_url: str) -> None:
    make_workflow("look", CHAIN)
    page = page_as("viewer")
    open_editor(page, live_url, "look")
    expect(page.locator("#ed-readonly")).to_contain_text("Read only")
    for hidden in ('[data-cmd="save"]', '[data-cmd="publish"]', '[data-cmd="import"]', ".ed-palette"):
        expect(page.locator(hidden)).to_have_count(0)
    select_node(page, "a")
    expect(page.get_by_label("timeout (s)")).to_be_disabled()
    page.keyboard.press("Delete")
    expect(page.locator(".ed-node")).to_have_count(3)


def test_select_move_delete_undo_and_redo(page_as: PageAs, live_url: str) -> None:
    make_workflow("tidy", CHAIN)
    page = page_as("editor")
    open_editor(page, live_url, "tidy")
    select_node(page, "a")
    node(page, "b").locator(".ed-node-box").click(modifiers=["Shift"])
    expect(page.locator(".ed-node.selected")).to_have_count(2)
    page.keyboard.press("Delete")
    expect(page.locator(".ed-node")).to_have_count(1)
    expect(page.locator(".ed-edge")).to_have_count(0)
    page.keyboard.press("Control+z")
    expect(page.locator(".ed-node")).to_have_count(3)
    expect(page.locator(".ed-edge")).to_have_count(2)
    page.keyboard.press("Control+Shift+z")
    expect(page.locator(".ed-node")).to_have_count(1)
    page.click('[data-cmd="undo"]')
    expect(page.locator(".ed-node")).to_have_count(3)

    before = node(page, "c").get_attribute("transform")
    drag(page, node(page, "c").locator(".ed-node-id"), page.locator("#ed-canvas"))
    expect(node(page, "c")).not_to_have_attribute("transform", before or "")
    page.click('[data-cmd="undo"]')
    expect(node(page, "c")).to_have_attribute("transform", before or "")

    box = page.locator("#ed-canvas").bounding_box()
    assert box is not None
    page.keyboard.down("Shift")
    page.mouse.move(box["x"] + 5, box["y"] + 5)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] - 5, box["y"] + box["height"] - 5, steps=8)
    page.mouse.up()
    page.keyboard.up("Shift")
    expect(page.locator(".ed-node.selected")).to_have_count(3)
    page.click('[data-cmd="delete"]')
    expect(page.locator(".ed-node")).to_have_count(0)
    expect(page.locator("#ed-problems-list")).to_contain_text("No problems")
    expect(page.locator('[data-cmd="save"]')).to_be_enabled()

    page.locator('.ed-palette-item[data-handler="core.delay"]').drag_to(page.locator("#ed-canvas"))
    expect(node(page, "delay")).to_have_count(1)
    with page.expect_download() as download:
        page.click('[data-cmd="export"]')
    exported = json.loads(Path(download.value.path()).read_text())
    assert exported["format"] == "switchyard.workflow/v1" and exported["slug"] == "tidy"
    assert exported["definition"]["nodes"] == [{"id": "delay", "handler": "core.delay", "config": {}}]


def test_roll_back_to_an_older_version_from_the_versions_tab(page_as: PageAs, live_url: str) -> None:
    workflow = make_workflow("rewind", CHAIN)
    add_draft(workflow, changed(CHAIN, "a", timeout_seconds=5))
    page = page_as("editor")
    open_editor(page, live_url, "rewind")
    page.click('[data-cmd="publish"]')
    page.click("#ed-dialog-ok")
    expect(page.locator("#ed-version-label")).to_contain_text("v2 · published · active")
    page.click('[data-tab="versions"]')
    page.locator('.ed-version[data-number="1"]').get_by_text("roll back to this").click()
    expect(page.locator("#ed-dialog")).to_contain_text("Make v1 the active version?")
    page.click("#ed-dialog-ok")
    expect(page.locator("#ed-status")).to_contain_text("v1 is now active")
    expect(page.locator('.ed-version[data-number="1"]')).to_contain_text("active")
    workflow.refresh_from_db()
    assert workflow.active_version.number == 1


def test_names_configs_and_conditions_are_shown_as_text(
    page_as: PageAs, live_url: str, tmp_path: Path
) -> None:
    make_workflow("inert", None)
    script = "<script>window.__pwned = 1</script>"
    image = '<img src=x onerror="window.__pwned = 2">'
    hostile = {
        "nodes": [
            {"id": "first", "handler": image, "config": {"note": script}},
            {"id": "second", "handler": "core.noop"},
        ],
        "edges": [{"source": "first", "target": "second", "when": f'output.x == "{image}"'}],
    }
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(hostile))
    page = page_as("editor")
    open_editor(page, live_url, "inert")
    page.set_input_files("#ed-import-file", str(path))
    expect(page.locator("#ed-problems-list")).to_contain_text(f"unknown handler '{image}'")
    expect(node(page, "first").locator("title")).to_have_text(f"first\n{image}")
    click_edge(page, "first", "second")
    expect(page.get_by_label("condition (when)")).to_have_value(f'output.x == "{image}"')
    assert page.locator("#editor img, #editor script").count() == 0
    assert page.evaluate("window.__pwned") is None
