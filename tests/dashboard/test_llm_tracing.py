"""OpenTelemetry export of LLM calls (GenAI attributes) and of runs started with a traceparent."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from monitoring.services import sources, tracing
from workflows.runs import actions as runs, tracecontext
from workflows.store.models import AgentStep, ChildRun, LLMCall, NodeRun, RunTraceParent

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


def test_child_runs_join_their_parents_trace_under_the_attempt_or_tool_call_that_started_them(
    db: None, dead_letter: Any
) -> None:
    """caller -> root run (traceparent) -> child (a workflow.run attempt) -> grandchild (an
    agent's workflow tool call): one trace, each run's span under what started it."""
    root = dead_letter.run
    RunTraceParent.objects.create(run=root, trace_id=CALLER_TRACE, parent_span_id=CALLER_SPAN)
    child, _ = runs.start_run(root.workflow, {"order": 2})
    grandchild, _ = runs.start_run(root.workflow, {"order": 3})
    ChildRun.objects.create(
        parent_run=root, node_run=dead_letter.node_run, node_id="boom", attempt=1, child=child
    )
    child_node = NodeRun.objects.get(run=child, node_id="boom")
    step = AgentStep.objects.create(
        node_run=child_node, attempt=2, seq=2, kind="tool", status="ok", fingerprint="f",
        idempotency_key=f"parent:{child.pk}:boom:tool:1.0", tool="demo-profile", started_at=timezone.now(), finished_at=timezone.now(),
    )  # fmt: skip
    ChildRun.objects.create(
        parent_run=child,
        node_run=child_node,
        node_id="boom",
        attempt=2,
        child=grandchild,
        depth=2,
        agent_step=step,
    )
    spans = export(
        [
            sources.Event(1, root.pk, 3, "node.attempt", "boom", 1, 20.5, 20.0, "failed", 500.0),
            sources.Event(2, child.pk, 3, "run.failed", "", 0, 21.0, None, None, None),
            sources.Event(3, grandchild.pk, 3, "run.failed", "", 0, 21.0, None, None, None),
        ]
    )
    child_span, grandchild_span = spans[f"run {child.pk}"], spans[f"run {grandchild.pk}"]
    assert child_span.context.trace_id == grandchild_span.context.trace_id == int(CALLER_TRACE, 16)
    assert child_span.parent.span_id == spans["node boom"].context.span_id
    assert child_span.parent.span_id == tracing.attempt_span_id(root.pk, "boom", 1)
    assert grandchild_span.parent.span_id == tracing.step_span_id(step.pk)


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
