"""A map node on the run page, in a real browser: progress, items page by page, a filter."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from tests.integration.conftest import node, publish, wait_finished
from tests.integration.runtime import Runtime
from workflows.runs import actions as runs


def test_the_run_page_shows_a_map_nodes_progress_and_its_items_paged(
    runtime: Runtime, page_as: Any, live_url: str, screenshot: Any
) -> None:
    definition = {
        "nodes": [
            node(
                "summarise",
                "demo.summarise_document",
                map="input.documents",
                max_parallel=8,
                on_item_failure="continue",
            ),
            node("report", "core.echo"),
        ],
        "edges": [{"source": "summarise", "target": "report"}],
    }
    documents: list[Any] = [f"document {i}" for i in range(120)]
    documents[7] = {"text": "<b>torn</b>", "broken": True}
    run, _ = runs.start_run(publish("browser-map", definition), {"documents": documents})
    assert wait_finished(run, 120).status == "succeeded"

    page = page_as("viewer")
    page.goto(f"{live_url}/runs/{run.pk}/")
    graph_node = page.locator('#run-graph [data-node="summarise"]')
    expect(graph_node).to_contain_text("items 119 done · 1 failed / 120")
    row = page.locator('#run-nodes tr[data-node="summarise"] [data-field="items"]')
    expect(row).to_contain_text("119 done · 1 failed / 120")

    row.click()
    panel = page.locator("#node-detail")
    expect(panel.locator('[data-field="map-progress"]')).to_contain_text("119 done")
    items = panel.locator("#map-items tbody tr[data-index]")
    expect(items).to_have_count(50)
    expect(items.first).to_contain_text("document 0")
    screenshot(page, "map-items-first-page")

    panel.locator("[data-action=more-items]").click()
    expect(items.first).to_have_attribute("data-index", "50")
    expect(items).to_have_count(50)
    panel.locator("[data-action=more-items]").click()
    expect(items).to_have_count(20)
    expect(items.last).to_have_attribute("data-index", "119")

    panel.locator('[data-bucket="failed"]').click()
    expect(items).to_have_count(1)
    expect(items.first).to_have_attribute("data-index", "7")
    expect(items.first).to_contain_text("document 7 is unreadable")
    expect(items.first).to_contain_text("<b>torn</b>")  # escaped, shown as text
    assert page.locator("#map-items b").count() == 0
    screenshot(page, "map-items-failed")
