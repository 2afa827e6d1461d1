"""OpenTelemetry export: one trace per run, a span per node attempt under the run's span."""

from __future__ import annotations

from typing import Any

import pytest

from monitoring.services import sources, tracing

otel = pytest.importorskip("opentelemetry.sdk.trace.export.in_memory_span_exporter")


def event(
    event_id: int, kind: str, node_id: str = "", status: str | None = None, **times: float
) -> sources.Event:
    return sources.Event(
        event_id, 42, 3, kind, node_id, 1, times.get("at", 20.0), times.get("start"), status, None
    )


def test_no_export_without_an_endpoint(settings: Any) -> None:
    settings.MONITOR = {**settings.MONITOR, "OTLP_ENDPOINT": ""}
    assert isinstance(tracing.exporter(), tracing.NoExport)


def test_node_attempts_become_child_spans_of_the_run_span(db: None, dead_letter: Any) -> None:
    memory = otel.InMemorySpanExporter()
    export = tracing.OtlpExport("http://127.0.0.1:1", "switchyard-test", exporter=memory)
    run_id = dead_letter.run_id
    batch = [
        sources.Event(1, run_id, 3, "node.attempt", "boom", 1, 20.5, 20.0, "failed", 500.0),
        sources.Event(2, run_id, 3, "run.failed", "", 0, 21.0, None, None, None),
    ]
    export.export(batch)
    export.flush()
    spans = {s.name: s for s in memory.get_finished_spans()}
    node_span, run_span = spans["node boom"], spans[f"run {run_id}"]
    assert node_span.context.trace_id == run_span.context.trace_id == tracing.trace_id(run_id)
    assert node_span.parent.span_id == run_span.context.span_id
    assert node_span.attributes["switchyard.run_id"] == run_id
    assert node_span.attributes["switchyard.node_id"] == "boom"
    assert (node_span.end_time - node_span.start_time) == 500_000_000
    assert not node_span.status.is_ok
    export.shutdown()


def test_agent_tool_calls_become_child_spans_of_their_attempt_beside_its_llm_calls(
    db: None, dead_letter: Any
) -> None:
    from datetime import UTC, datetime

    from workflows.store.models import AgentStep

    at = lambda seconds: datetime.fromtimestamp(seconds, UTC)  # noqa: E731
    common = {"node_run": dead_letter.node_run, "fingerprint": "f", "attempt": 1}
    AgentStep.objects.create(
        **common, seq=1, kind="turn", status="ok", idempotency_key="k:turn:1", model="gpt-x",
        started_at=at(20.0), finished_at=at(20.2),
    )  # fmt: skip
    AgentStep.objects.create(
        **common, seq=2, kind="tool", status="error", idempotency_key="k:tool:1.0", tool="demo.get_weather",
        call_id="call_1", error="no such city", started_at=at(20.2), finished_at=at(20.25),
    )  # fmt: skip
    memory = otel.InMemorySpanExporter()
    export = tracing.OtlpExport("http://127.0.0.1:1", "switchyard-test", exporter=memory)
    export.export(
        [sources.Event(7, dead_letter.run_id, 3, "node.attempt", "boom", 1, 20.5, 20.0, "failed", 500.0)]
    )
    export.flush()
    spans = {s.name: s for s in memory.get_finished_spans()}
    assert set(spans) == {"node boom", "execute_tool demo.get_weather"}  # the turn is its LLM call's span
    node_span, tool = spans["node boom"], spans["execute_tool demo.get_weather"]
    assert tool.parent.span_id == node_span.context.span_id
    assert tool.context.trace_id == node_span.context.trace_id
    assert (tool.attributes["gen_ai.tool.name"], tool.attributes["gen_ai.tool.call.id"]) == (
        "demo.get_weather",
        "call_1",
    )
    assert tool.attributes["error.type"] == "no such city"
    assert tool.end_time - tool.start_time == 50_000_000
    export.shutdown()
