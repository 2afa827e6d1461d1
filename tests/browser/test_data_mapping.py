"""Data mapping in the editor (issue 28, item 6): the inspector shows the run input and each
upstream node's output of the latest run as trees; a click inserts a field's placeholder
into the config field being edited."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page, expect

from tests.browser.editor_fixtures import open_editor, select_node
from tests.factories import make_workflow
from tests.integration.conftest import wait_finished
from tests.integration.runtime import Runtime
from workflows.runs import actions as runs

FLOW = {
    "nodes": [
        {"id": "fetch", "handler": "core.echo"},
        {"id": "tell", "handler": "core.fail", "config": {"message": "Order "}},
    ],
    "edges": [{"source": "fetch", "target": "tell"}],
}


def test_a_field_of_an_upstream_output_is_inserted_as_its_placeholder(
    runtime: Runtime, page_as: Any, live_url: str, screenshot: Any
) -> None:
    workflow = make_workflow("data-mapping", FLOW, publish=True)
    run, _ = runs.start_run(workflow, {"order": {"id": "A-7", "lines": [{"sku": "kb-1"}]}})
    wait_finished(run)
    page: Page = page_as("editor")
    open_editor(page, live_url, "data-mapping")
    select_node(page, "tell")
    data = page.locator(".ed-upstream")
    expect(data.locator('[data-link="sample-run"]')).to_have_text(f"run {run.pk}")
    expect(data.locator('[data-source="input"] [data-placeholder="{input.order.id}"]')).to_be_visible()
    field = page.locator('[data-field="config.message"] input, [data-field="config.message"] textarea').first
    field.click()
    field.press("End")
    data.locator('[data-source="fetch"] [data-placeholder="{upstream.fetch.input.order.id}"]').click()
    expect(field).to_have_value("Order {upstream.fetch.input.order.id}")
    expect(page.locator('[data-cmd="save"]')).to_be_enabled()  # an edit like any typed one
    screenshot(page, "data-mapping")


def test_a_test_run_of_a_draft_feeds_the_data_trees_and_links_to_its_run_page_labelled_as_a_test(
    runtime: Runtime, page_as: Any, live_url: str, screenshot: Any
) -> None:
    flow = {
        "nodes": [{"id": "fetch", "handler": "core.echo"}, {"id": "tell", "handler": "core.noop"}],
        "edges": FLOW["edges"],
    }
    make_workflow("data-test-run", flow, publish=False)
    page: Page = page_as("editor")
    open_editor(page, live_url, "data-test-run")
    select_node(page, "tell")
    expect(page.locator(".ed-upstream")).to_contain_text("No run yet")
    page.click('[data-tab="testrun"]')
    page.fill("#ed-run-input", '{"customer": {"name": "Ada"}}')
    page.click("#ed-run-start")
    expect(page.locator("#editor")).to_have_attribute("data-run", "succeeded", timeout=30_000)
    result = page.locator(".ed-run-result")
    expect(result.locator('.ed-run-nodes [data-node="fetch"]')).to_contain_text("Ada")  # its output
    page.click('[data-tab="inspect"]')
    link = page.locator('.ed-upstream [data-link="sample-run"]')
    expect(link).to_contain_text("test run")
    expect(
        page.locator('.ed-upstream [data-placeholder="{upstream.fetch.input.customer.name}"]')
    ).to_be_visible()
    screenshot(page, "test-run-data")
    page.click('[data-tab="testrun"]')
    result.locator('[data-link="test-run"]').click()
    expect(page.locator('h1 [data-field="test-run"]')).to_have_text("test run of a draft")
