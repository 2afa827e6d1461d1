"""A map node on the run page, in a real browser: progress, items page by page, a filter."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from playwright.sync_api import expect

from tests.fakes.llm_server import FakeLLMServer
from tests.integration.conftest import node, publish, wait_finished
from tests.integration.runtime import Runtime
from workflows.runs import actions as runs
from workflows.store.models import LLMPrice, LLMProvider


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


def test_a_map_of_llm_calls_shows_its_items_calls_and_their_usage_in_the_node_panel(
    runtime: Runtime, page_as: Any, live_url: str, screenshot: Any
) -> None:
    def answer(request: Any) -> dict[str, Any]:
        return {
            "model": "tiny-1",
            "choices": [{"message": {"role": "assistant", "content": "a summary"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 8, "completion_tokens": 2},
        }

    with FakeLLMServer(reply=answer) as fake:
        LLMProvider.objects.create(
            name="fakeco", base_url=fake.base_url, default_model="tiny-1", is_default=True
        )
        LLMPrice.objects.create(
            model="tiny-1", input_per_million=Decimal(1000), output_per_million=Decimal(1000)
        )
        each = node("summarise", "llm.chat", config={"prompt": "Summarise {item}."}, map="input.documents")
        documents = [f"document {i}" for i in range(6)]
        run, _ = runs.start_run(publish("browser-map-llm", {"nodes": [each]}), {"documents": documents})
        assert wait_finished(run, 120).status == "succeeded"
        assert len(fake.requests) == 6

    page = page_as("viewer")
    page.goto(f"{live_url}/runs/{run.pk}/")
    page.locator('#run-nodes tr[data-node="summarise"]').click()
    panel = page.locator("#node-detail")
    expect(panel.locator("#node-llm-usage")).to_contain_text("6 calls · 48 in / 12 out tokens · cost 0.0600")
    rows = panel.locator("table.grid tbody tr", has_text="· item ")
    expect(rows).to_have_count(6)
    expect(panel).not_to_contain_text("more calls of its items")  # all 6 are listed
    assert panel.locator("[data-llm-node]").count() == 0, "a map node shows no streamed text box"
    screenshot(page, "map-llm-calls")
