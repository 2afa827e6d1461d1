"""Placeholders nothing provides (issue 28, item 4): the editor warns naming the node and
the field, and one click adds a missing run-input field to the input schema."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page, expect

from tests.browser.editor_fixtures import open_editor, select_node
from tests.factories import make_workflow
from tests.integration.conftest import wait_finished
from tests.integration.runtime import Runtime
from workflows.runs import actions as runs
from workflows.store.models import WorkflowVersion

FLOW = {
    "nodes": [
        {"id": "fetch", "handler": "core.echo"},
        {
            "id": "tell",
            "handler": "core.fail",
            "config": {"message": "Order {input.order_id}: {upstream.fetch.body}"},
        },
    ],
    "edges": [{"source": "fetch", "target": "tell"}],
}


def test_unprovided_placeholders_are_warned_and_an_input_field_is_added_in_one_click(
    runtime: Runtime, page_as: Any, live_url: str, screenshot: Any
) -> None:
    workflow = make_workflow("gaps", FLOW, publish=True)
    run, _ = runs.start_run(workflow, {"order_id": "A-7"})  # fetch's known output: no `body`
    wait_finished(run)
    page: Page = page_as("editor")
    open_editor(page, live_url, "gaps")
    warnings = page.locator("#ed-problems .ed-warning")
    expect(warnings).to_have_count(2)
    expect(warnings.nth(0)).to_contain_text("node tell")
    expect(warnings.nth(0)).to_contain_text("`order_id`")
    expect(warnings.nth(1)).to_contain_text("the latest output of node 'fetch' has no `body`")
    expect(page.locator("#ed-problems")).to_have_attribute("data-count", "0")  # warnings do not block
    page.set_viewport_size({"width": 1280, "height": 800})
    page.click('[data-cmd="fit"]')  # the canvas is smaller now: bring every node back in view
    screenshot(page, "warned")

    select_node(page, "tell")
    field = page.locator('[data-field="config.message"] .ed-field-warning')
    expect(field).to_have_count(2)  # under the field, in the inspector too
    expect(field.first.locator('[data-add-field="order_id"]')).to_be_visible()
    page.click('#ed-problems [data-add-field="order_id"]')
    expect(warnings).to_have_count(1)  # revalidated: order_id is declared now
    page.fill("#ed-comment", "declare order_id")
    page.click('[data-cmd="save"]')
    expect(page.locator("#ed-status")).to_contain_text("Saved as new draft")
    saved = WorkflowVersion.objects.filter(workflow=workflow, status="draft").get()
    schema = saved.definition["input_schema"]
    assert schema["properties"] == {"order_id": {"type": "string"}}
    assert schema["required"] == ["order_id"]
    page.set_viewport_size({"width": 800, "height": 900})
    screenshot(page, "added-800")
