"""OpenTelemetry export of LLM calls (GenAI attributes) and of runs started with a traceparent."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from monitoring import sources, tracing
from workflows import tracecontext
from workflows.models import LLMCall, NodeRun, RunTraceParent

otel = pytest.importorskip("opentelemetry.sdk.trace.export.in_memory_span_exporter")
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


def export(batch: list[sources.Event]) -> dict[str, Any]:
    memory = otel.InMemorySpanExporter()
    exporter = tracing.OtlpExport("http://127.0.0.1:1", "switchyard-test", exporter=memory)
    exporter.export(batch)
    exporter.flush()
    spans = {s.name: s for s in memory.get_finished_spans()}
    exporter.shutdown()
    return spans


def test_an_llm_call_is_a_child_span_of_its_attempt_with_the_genai_attributes(
    db: None, dead_letter: Any
) -> None:
    run_id = dead_letter.run_id
    node = NodeRun.objects.get(run_id=run_id, node_id="boom")
    call = LLMCall.objects.create(
        node_run=node, run_id=run_id, workflow_id=node.run.workflow_id, node_id="boom", attempt=1,
        provider="acme", model="acme-large", response_model="acme-large-2026", input_tokens=12,
        output_tokens=40, latency_ms=250.0, cost=Decimal("0.001"), finish_reason="stop",
    )  # fmt: skip
    at = call.created_at.timestamp()
    spans = export(
        [sources.Event(1, run_id, 3, "node.attempt", "boom", 1, at + 0.1, at - 1, "failed", 1100.0)]
    )
    llm, attempt = spans["chat acme-large"], spans["node boom"]
    assert llm.parent.span_id == attempt.context.span_id and llm.context.trace_id == attempt.context.trace_id
    assert llm.attributes["gen_ai.system"] == "acme"
    assert llm.attributes["gen_ai.request.model"] == "acme-large"
    assert llm.attributes["gen_ai.response.model"] == "acme-large-2026"
    assert llm.attributes["gen_ai.usage.input_tokens"] == 12
    assert llm.attributes["gen_ai.usage.output_tokens"] == 40
    assert tuple(llm.attributes["gen_ai.response.finish_reasons"]) == ("stop",)
    assert abs((llm.end_time - llm.start_time) - 250_000_000) < 1_000  # ns, float seconds


def test_a_run_started_with_a_traceparent_joins_the_callers_trace(db: None, dead_letter: Any) -> None:
    run_id = dead_letter.run_id
    RunTraceParent.objects.create(run_id=run_id, trace_id=CALLER_TRACE, parent_span_id=CALLER_SPAN)
    spans = export(
        [
            sources.Event(1, run_id, 3, "node.attempt", "boom", 1, 20.5, 20.0, "failed", 500.0),
            sources.Event(2, run_id, 3, "run.failed", "", 0, 21.0, None, None, None),
        ]
    )
    run_span, node_span = spans[f"run {run_id}"], spans["node boom"]
    assert run_span.context.trace_id == node_span.context.trace_id == int(CALLER_TRACE, 16)
    assert run_span.parent.span_id == int(CALLER_SPAN, 16)
    assert node_span.parent.span_id == run_span.context.span_id


@pytest.mark.parametrize(
    ("header", "parsed"),
    [
        (f"00-{CALLER_TRACE}-{CALLER_SPAN}-01", (CALLER_TRACE, CALLER_SPAN)),
        (f"00-{CALLER_TRACE.upper()}-{CALLER_SPAN}-00", (CALLER_TRACE, CALLER_SPAN)),
        (f"00-{'0' * 32}-{CALLER_SPAN}-01", None),
        (f"00-{CALLER_TRACE}-{'0' * 16}-01", None),
        (f"ff-{CALLER_TRACE}-{CALLER_SPAN}-01", None),
        ("garbage", None),
        (None, None),
    ],
)
def test_traceparent_headers_are_parsed_as_the_w3c_says(header: str | None, parsed: Any) -> None:
    assert tracecontext.parse(header) == parsed
