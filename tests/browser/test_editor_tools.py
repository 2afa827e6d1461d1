"""The editor's tools in Chromium: the layout of a 2,000-node graph, node categories, the
grouped palette and its search, the minimap, find, copy/paste/duplicate, condition labels
and the toolbar, each on a page that logs no console error."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.browser.editor_fixtures import center, edge, layered_definition, node, open_editor, select_node
from tests.factories import CHAIN, make_workflow
from workflows.handlers.registry import registered
from workflows.store.models import Workflow

PageAs = Callable[[str], Page]
Screenshot = Callable[[Page, str], Path]
LAYOUT_TRIES = 5
LAYOUT_DEADLINE_MS = 120_000  # a deadline for a shared, busy CI machine; the bench measures


@pytest.fixture
def editor_page(page_as: PageAs) -> Iterator[Page]:
    """A page logged in as an editor whose console errors and uncaught exceptions fail the test."""
    page = page_as("editor")
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    assert errors == [], f"console errors: {errors}"


def test_a_2000_node_6000_edge_graph_is_laid_out_five_times_in_a_row(
    editor_page: Page, live_url: str, screenshot: Screenshot
) -> None:
    definition = layered_definition(2000, fan_in=3)
    assert len(definition["edges"]) == 5970
    make_workflow("huge", definition, publish=False)
    page = editor_page
    page.goto(f"{live_url}/workflows/huge/")  # laid out on opening: no stored positions yet
    expect(page.locator("#editor")).to_have_attribute("data-layout", "done", timeout=LAYOUT_DEADLINE_MS)
    expect(page.locator(".ed-node")).to_have_count(2000)
    for attempt in range(1, LAYOUT_TRIES + 1):
        page.click('[data-cmd="layout"]')
        expect(page.locator("#editor")).to_have_attribute("data-layout", "done", timeout=LAYOUT_DEADLINE_MS)
        expect(page.locator("#ed-status")).to_contain_text("Laid out 2000 nodes")
        timings = page.evaluate("window.switchyardEditor.timings")
        print(
            f"layout {attempt}: {timings['layoutWorkerMs']:.0f} ms in the worker,"
            f" {timings['layoutMs']:.0f} ms until drawn"
        )
    places = page.evaluate(
        """() => [...window.switchyardEditor.doc.nodes.values()].map(n => [n.data.id, n.x, n.y])"""
    )
    at = {node_id: (x, y) for node_id, x, y in places}
    assert len(set(at.values())) == 2000  # every node has a place of its own
    # Layered left to right: every edge points rightwards, to a later column.
    assert all(at[e["source"]][0] < at[e["target"]][0] for e in definition["edges"])
    screenshot(page, "2000-nodes-laid-out")


def test_nodes_show_their_category_and_the_palette_is_grouped_and_searchable(
    editor_page: Page, live_url: str, screenshot: Screenshot
) -> None:
    make_workflow("kinds", None)
    page = editor_page
    open_editor(page, live_url, "kinds")
    groups = page.locator(".ed-palette-group")
    expect(groups.first).to_have_attribute("data-category", "core")
    expect(groups.last).to_have_attribute("data-category", "demo")  # demo handlers apart, last
    first_demo = min(name for name in registered() if name.startswith("demo."))  # the group is sorted
    expect(page.locator('.ed-palette-group[data-category="demo"] .ed-palette-item').first).to_have_attribute(
        "data-handler", first_demo
    )
    assert page.locator('.ed-palette-group[data-category="core"] [data-handler^="demo."]').count() == 0

    page.fill("#ed-palette-filter", "http")
    expect(page.locator(".ed-palette-item:visible")).to_have_count(1)
    expect(page.locator(".ed-palette-item:visible")).to_have_attribute("data-handler", "http.request")
    expect(page.locator(".ed-palette-group:visible")).to_have_count(1)
    page.fill("#ed-palette-filter", "an SLA")  # the docstrings count too
    expect(page.locator(".ed-palette-item:visible")).to_have_attribute("data-handler", "human.approval")
    page.fill("#ed-palette-filter", "no such handler")
    expect(page.locator(".ed-palette-empty")).to_be_visible()
    page.fill("#ed-palette-filter", "")
    expect(page.locator(".ed-palette-empty")).to_be_hidden()

    for handler in ("core.noop", "http.request", "llm.chat", "human.approval", "demo.fetch_profile"):
        page.click(f'.ed-palette-item[data-handler="{handler}"]')
    expected = {
        "noop": "core",
        "request": "http",
        "chat": "llm",
        "approval": "human",
        "fetch_profile": "demo",
    }
    colours = set()
    for node_id, category in expected.items():
        expect(node(page, node_id)).to_have_class(re.compile(rf"\bcat-{category}\b"))
        colours.add(
            node(page, node_id).locator(".ed-node-stripe").evaluate("el => getComputedStyle(el).fill")
        )
        assert node(page, node_id).locator(".ed-node-icon").get_attribute("d")
    assert len(colours) == 5  # one colour per category
    screenshot(page, "categories")


def test_the_minimap_shows_every_node_and_moves_the_view(editor_page: Page, live_url: str) -> None:
    make_workflow("mapped", layered_definition(200))
    page = editor_page
    open_editor(page, live_url, "mapped")
    minimap = page.locator("#ed-minimap")
    expect(minimap).to_be_visible()
    expect(minimap).to_have_attribute("data-nodes", "200")
    for _ in range(8):
        page.click('[data-cmd="zoom-in"]')
    before = page.locator(".ed-viewport").get_attribute("transform")
    box = minimap.bounding_box()
    assert box is not None
    page.mouse.click(box["x"] + box["width"] * 0.9, box["y"] + box["height"] * 0.5)
    assert page.locator(".ed-viewport").get_attribute("transform") != before


def test_find_centres_and_selects_a_node_by_name(
    editor_page: Page, live_url: str, screenshot: Screenshot
) -> None:
    make_workflow("haystack", layered_definition(500))
    page = editor_page
    open_editor(page, live_url, "haystack")
    page.locator("#ed-canvas svg").click(position={"x": 5, "y": 5})
    page.keyboard.press("Control+f")
    expect(page.locator("#ed-find-input")).to_be_focused()
    page.keyboard.type("n0321")
    page.keyboard.press("Enter")
    expect(page.locator("#ed-inspect h3")).to_contain_text("n0321")
    expect(node(page, "n0321")).to_have_class(re.compile(r"\bselected\b"))
    expect(page.locator("#ed-find-count")).to_have_text("1 of 1")
    canvas = page.locator("#ed-canvas").bounding_box()
    assert canvas is not None
    x, y = center(node(page, "n0321").locator(".ed-node-box"))
    assert (
        abs(x - (canvas["x"] + canvas["width"] / 2)) < 5 and abs(y - (canvas["y"] + canvas["height"] / 2)) < 5
    )
    screenshot(page, "found")
    page.fill("#ed-find-input", "n049")  # n0490..n0499: Enter steps through them
    expect(page.locator("#ed-find-count")).to_have_text("1 of 10")
    page.keyboard.press("Enter")
    expect(page.locator("#ed-find-count")).to_have_text("2 of 10")
    expect(page.locator("#ed-inspect h3")).to_contain_text("n0491")
    page.keyboard.press("Escape")
    expect(page.locator("#ed-find")).to_be_hidden()


def test_copy_paste_and_duplicate_give_new_ids_and_keep_the_edges_between_copies(
    editor_page: Page, live_url: str, screenshot: Screenshot
) -> None:
    make_workflow("copies", CHAIN)
    page = editor_page
    open_editor(page, live_url, "copies")
    select_node(page, "a")
    node(page, "b").locator(".ed-node-box").click(modifiers=["Shift"])
    page.keyboard.press("Control+c")
    expect(page.locator("#ed-status")).to_contain_text("Copied 2 nodes and 1 edges")
    page.keyboard.press("Control+v")
    expect(page.locator(".ed-node")).to_have_count(5)
    expect(page.locator(".ed-node.selected")).to_have_count(2)  # the copies, ready to move
    expect(edge(page, "a_2", "b_2")).to_have_count(1)
    expect(page.locator('.ed-edge[data-source="b_2"]')).to_have_count(0)  # b -> c left c behind
    page.keyboard.press("Control+d")
    expect(page.locator(".ed-node")).to_have_count(7)
    expect(edge(page, "a_3", "b_3")).to_have_count(1)
    expect(page.locator("#ed-problems")).to_have_attribute("data-count", "0")
    screenshot(page, "pasted")
    page.click('[data-cmd="save"]')
    expect(page.locator("#ed-status")).to_contain_text("Saved as new draft v2")
    saved = Workflow.objects.get(slug="copies").versions.get(number=2).definition
    assert [n["id"] for n in saved["nodes"]] == ["a", "b", "c", "a_2", "b_2", "a_3", "b_3"]
    assert [n["handler"] for n in saved["nodes"][3:]] == ["core.noop", "core.echo"] * 2
    pairs = {(e["source"], e["target"]) for e in saved["edges"]}
    assert pairs == {("a", "b"), ("b", "c"), ("a_2", "b_2"), ("a_3", "b_3")}


def test_condition_labels_sit_on_a_background_off_the_nodes(
    editor_page: Page, live_url: str, screenshot: Screenshot
) -> None:
    fan = {
        "nodes": [{"id": "score", "handler": "core.echo"}]
        + [{"id": f"branch_{i}", "handler": "core.noop"} for i in range(6)],
        "edges": [
            {"source": "score", "target": f"branch_{i}", "when": f"output.input.score > {i * 10}"}
            for i in range(6)
        ],
    }
    make_workflow("branches", fan)
    page = editor_page
    open_editor(page, live_url, "branches")
    labels = page.locator(".ed-edge-tag")
    expect(labels).to_have_count(6)
    nodes = [b for b in (n.bounding_box() for n in page.locator(".ed-node-box").all()) if b]
    for tag in labels.all():
        expect(tag.locator("text")).to_have_text(re.compile(r"^output\.input\.score > \d+$"))
        fill = tag.locator(".ed-edge-label-box").evaluate("el => getComputedStyle(el).fill")
        assert fill not in ("none", "rgba(0, 0, 0, 0)")
        box = tag.locator(".ed-edge-label-box").bounding_box()
        assert box is not None
        assert not any(overlaps(box, n) for n in nodes), "a condition label covers a node"
    labels.first.click()
    expect(page.get_by_label("condition (when)")).to_have_value("output.input.score > 0")
    screenshot(page, "labels")


def overlaps(a: dict[str, float], b: dict[str, float]) -> bool:
    return (
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and b["y"] < a["y"] + a["height"]
    )


def test_the_toolbar_is_one_row_at_1440_pixels(
    editor_page: Page, live_url: str, screenshot: Screenshot
) -> None:
    make_workflow("wide", CHAIN)
    page = editor_page
    page.set_viewport_size({"width": 1440, "height": 900})
    open_editor(page, live_url, "wide")
    middles = page.eval_on_selector_all(
        ".ed-bar > *:not([hidden])",
        "els => els.map(e => { const r = e.getBoundingClientRect(); return r.top + r.height / 2; })",
    )
    assert max(middles) - min(middles) < 4, f"the toolbar wraps: items centred at {sorted(middles)}"
    bar = page.locator(".ed-bar").bounding_box()
    assert bar is not None and bar["height"] < 60
    for command in ("undo", "duplicate", "layout", "find", "save", "publish", "start-run"):
        box = page.locator(f'[data-cmd="{command}"]').bounding_box()
        assert box is not None and box["x"] + box["width"] <= 1440, f"{command} is cut off"
    screenshot(page, "toolbar-1440")
