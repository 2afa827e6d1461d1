"""Helpers for the editor's browser tests and its benchmark: generated large definitions and
mouse gestures on the canvas (workflows come from tests/factories.py)."""

from __future__ import annotations

import copy
from typing import Any

from playwright.sync_api import Locator, Page, expect


def changed(definition: dict[str, Any], node_id: str, **fields: Any) -> dict[str, Any]:
    """Return a copy of a definition with one node's fields changed."""
    result = copy.deepcopy(definition)
    next(n for n in result["nodes"] if n["id"] == node_id).update(fields)
    return result


def layered_definition(
    count: int, width: int = 10, handler: str = "core.noop", fan_in: int = 2
) -> dict[str, Any]:
    """A DAG of `count` nodes in layers of `width`: each node depends on up to `fan_in` nodes
    of the layer before (a deterministic pattern, so every run measures the same graph;
    2,000 nodes in layers of 10 with a fan-in of 3 make 5,970 edges)."""
    nodes = [{"id": f"n{i:04d}", "handler": handler} for i in range(count)]
    edges = []
    for i in range(width, count):
        layer_start = (i // width - 1) * width
        offsets = [i % width]
        for k in range(1, min(fan_in, width)):
            offset = (i * (5 + 2 * k) + 3 * k) % width
            while offset in offsets:
                offset = (offset + 1) % width
            offsets.append(offset)
        edges += [{"source": f"n{layer_start + o:04d}", "target": f"n{i:04d}"} for o in sorted(offsets)]
    return {"description": f"{count} generated nodes", "nodes": nodes, "edges": edges}


# --- the page -------------------------------------------------------------------------------


def open_editor(page: Page, live_url: str, slug: str, version: int | None = None) -> None:
    """Open a workflow in the editor and wait until it is laid out and validated."""
    page.goto(f"{live_url}/workflows/{slug}/" + (f"?version={version}" if version else ""))
    wait_ready(page)


def wait_ready(page: Page) -> None:
    editor = page.locator("#editor")
    expect(editor).to_have_attribute("data-layout", "done")
    expect(editor).to_have_attribute("data-validation", "done")


def node(page: Page, node_id: str) -> Locator:
    return page.locator(f'.ed-node[data-id="{node_id}"]')


def edge(page: Page, source: str, target: str) -> Locator:
    return page.locator(f'.ed-edge[data-source="{source}"][data-target="{target}"]')


def center(locator: Locator) -> tuple[float, float]:
    box = locator.bounding_box()
    assert box is not None, f"{locator} is not visible"
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


def drag(page: Page, source: Locator, target: Locator) -> None:
    """Press the mouse on one element, move it in steps onto another, release."""
    sx, sy = center(source)
    tx, ty = center(target)
    page.mouse.move(sx, sy)
    page.mouse.down()
    page.mouse.move(tx, ty, steps=12)
    page.mouse.up()


def connect(page: Page, source: str, target: str) -> None:
    """Drag from a node's output port onto another node's input port."""
    drag(page, node(page, source).locator(".ed-port-out"), node(page, target).locator(".ed-port-in"))


def click_edge(page: Page, source: str, target: str) -> None:
    """Click the middle of an edge's curve (where its wide, invisible hit path is)."""
    point = (
        edge(page, source, target)
        .locator(".ed-edge-line")
        .evaluate(
            """path => {
            const p = path.getPointAtLength(path.getTotalLength() / 2);
            const m = path.getScreenCTM();
            return [p.x * m.a + p.y * m.c + m.e, p.x * m.b + p.y * m.d + m.f];
        }"""
        )
    )
    page.mouse.click(point[0], point[1] + 3)  # a little off the line: the hit path is wider


def select_node(page: Page, node_id: str) -> None:
    node(page, node_id).locator(".ed-node-box").click()
    expect(page.locator("#ed-inspect h3")).to_contain_text(node_id)
