"""Flow control in the editor (Chromium, live Daphne): an editor sets a node's concurrency key
and the workflow's singleton, saves, and the saved draft holds them together with the fields
it had (input schema, debounce removed for singleton); a bad key is shown on its field."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.browser.editor_fixtures import open_editor, select_node
from tests.factories import add_draft, make_workflow
from workflows.store.models import WorkflowVersion

SCHEMA = {"type": "object", "properties": {"customer": {"type": "string"}, "order": {"type": "string"}}}
DEFINITION = {
    "nodes": [{"id": "a", "handler": "core.noop"}, {"id": "b", "handler": "core.noop"}],
    "edges": [{"source": "a", "target": "b"}],
    "input_schema": SCHEMA,
}


def test_an_editor_declares_keys_and_saving_keeps_every_workflow_field(
    page_as: Callable[[str], Page], live_url: str, screenshot: Callable[[Page, str], Path]
) -> None:
    workflow = make_workflow("keyed-edit", DEFINITION)
    add_draft(workflow, DEFINITION)
    page = page_as("editor")
    open_editor(page, live_url, "keyed-edit", version=2)

    select_node(page, "b")
    node_keys = page.locator("fieldset[data-flow=concurrency]")
    node_keys.get_by_label("key", exact=True).fill("input.tenant")  # the schema does not declare it
    node_keys.get_by_label("limit per key").fill("2")
    expect(page.locator("#editor")).to_have_attribute("data-issues", "1")
    expect(node_keys).to_contain_text("does not declare")
    node_keys.get_by_label("key", exact=True).fill("input.customer")
    expect(page.locator("#editor")).to_have_attribute("data-issues", "0")

    page.locator("#ed-canvas").click(position={"x": 5, "y": 5})  # the workflow's own panel
    singleton = page.locator("fieldset[data-flow=singleton]")
    singleton.get_by_label("key", exact=True).fill("input.order")
    singleton.get_by_label("mode").select_option("queue")
    for width in (1280, 800):
        page.set_viewport_size({"width": width, "height": 900})
        shutil.copy(screenshot(page, f"editor-{width}"), f"/tmp/flow-editor-{width}.png")
    page.click('[data-cmd="save"]')
    expect(page.locator("#ed-status")).to_contain_text("Saved draft v2")

    saved = WorkflowVersion.objects.get(workflow=workflow, number=2).definition
    assert saved["input_schema"] == SCHEMA, "a field the editor does not draw is kept"
    assert saved["singleton"] == {"key": "input.order", "mode": "queue", "default": ""}
    assert saved["nodes"][1]["concurrency"] == {"key": "input.customer", "limit": 2, "default": ""}
