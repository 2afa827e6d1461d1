"""A map node's items' LLM calls, recorded under the map node: its panel lists the first ones
and counts them all; the trace export keeps a bounded number of spans per attempt."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from monitoring.services import runstate, sources, tracing
from tests.dashboard.test_llm_tracing import otel
from tests.integration.conftest import node, publish
from workflows.runs import actions as runs
from workflows.store.models import LLMCall, NodeRun

ITEMS = max(runstate.CALLS_SHOWN, tracing.LLM_SPANS_PER_ATTEMPT) + 7


@pytest.fixture
def map_node(db: None, redis_clean: None) -> NodeRun:
    """A map node whose items made ITEMS calls (rows made directly: no workers involved)."""
    each = node("each", "llm.chat", config={"prompt": "Summarise {item}."}, map="input.documents")
    run, _ = runs.start_run(publish("map-calls", {"nodes": [each]}), {"documents": ["a"] * ITEMS})
    found = NodeRun.objects.get(run=run, node_id="each")
    NodeRun.objects.filter(pk=found.pk).update(status="succeeded", attempt=1)
    LLMCall.objects.bulk_create(
        LLMCall(
            node_run=found,
            run_id=run.pk,
            workflow_id=run.workflow_id,
            node_id="each",
            attempt=1,
            step=f"item {i}",
            provider="acme",
            model="acme-small",
            input_tokens=10,
            output_tokens=3,
            latency_ms=5.0,
            cost=Decimal("0.001"),
            finish_reason="stop",
        )  # fmt: skip
        for i in range(ITEMS)
    )
    return found


def test_the_panel_lists_the_first_item_calls_and_counts_them_all(map_node: NodeRun, client_as: Any) -> None:
    html = client_as("viewer").get(f"/runs/{map_node.run_id}/nodes/each/").content.decode()

    assert html.count("1 · item ") == runstate.CALLS_SHOWN
    assert "1 · item 0<" in html and f"1 · item {ITEMS - 1}<" not in html
    assert f"and {ITEMS - runstate.CALLS_SHOWN} more calls of its items" in html
    assert f"{ITEMS} calls · {10 * ITEMS} in / {3 * ITEMS} out tokens" in html


def test_the_trace_export_keeps_a_bounded_number_of_llm_spans_per_attempt(map_node: NodeRun) -> None:
    memory = otel.InMemorySpanExporter()
    exporter = tracing.OtlpExport("http://127.0.0.1:1", "switchyard-test", exporter=memory)
    at = LLMCall.objects.filter(node_run=map_node).first().created_at.timestamp()
    exporter.export(
        [sources.Event(1, map_node.run_id, 3, "node.attempt", "each", 1, at + 1, at - 1, "succeeded", 2000.0)]
    )
    exporter.flush()
    names = [s.name for s in memory.get_finished_spans()]
    exporter.shutdown()

    assert names.count("chat acme-small") == tracing.LLM_SPANS_PER_ATTEMPT < ITEMS
    assert names.count("node each") == 1
