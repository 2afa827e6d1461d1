"""Spans exported over OTLP/HTTP to a receiver on a real socket (the official exporter, the
official protobufs decoding): each span carries its OpenInference kind beside the GenAI
attributes: CHAIN for the run and plain nodes, AGENT for an llm.agent attempt, LLM for each
model call, TOOL for each tool call."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from monitoring.services import sources, tracing
from tests.fakes.otlp_receiver import OtlpReceiver, Span
from tests.integration.conftest import publish
from workflows.runs import actions as runs
from workflows.store import traceids
from workflows.store.models import AgentStep, LLMCall, NodeRun

pytest.importorskip("opentelemetry.exporter.otlp.proto.http.trace_exporter")

FLOW = {
    "nodes": [
        {"id": "think", "handler": "llm.agent", "config": {"prompt": "Plan for {input.who}."}},
        {"id": "after", "handler": "core.echo"},
    ],
    "edges": [{"source": "think", "target": "after"}],
}


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as running:
        yield running


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def an_agent_run(db: None) -> tuple[int, int]:
    """A run whose agent attempt made one model call (with prompt-cache reads) and one tool call."""
    workflow = publish("planner", FLOW)
    run, _ = runs.start_run(workflow, {"who": "ada"})
    think = NodeRun.objects.get(run=run, node_id="think")
    LLMCall.objects.create(
        node_run=think, run=run, workflow=workflow, node_id="think", attempt=1, step="turn 1",
        provider="claude", model="claude-sonnet-4-5", response_model="claude-sonnet-4-5-20250929",
        input_tokens=1030, output_tokens=12, cache_read_tokens=1000, latency_ms=400.0,
        cost=Decimal("0.0033"), finish_reason="tool_calls",
    )  # fmt: skip
    AgentStep.objects.create(
        node_run=think, fingerprint="f", attempt=1, seq=2, kind="tool", status="ok",
        idempotency_key="k:tool:1.0", tool="demo.get_weather", call_id="toolu_1",
        started_at=at(20.2), finished_at=at(20.3),
    )  # fmt: skip
    return run.pk, workflow.pk


def test_the_spans_reach_an_otlp_receiver_with_their_openinference_kinds(
    db: None, receiver: OtlpReceiver
) -> None:
    run_id, workflow_id = an_agent_run(db)
    export = tracing.OtlpExport(receiver.endpoint, "switchyard-test")
    export.export(
        [
            sources.Event(
                1, run_id, workflow_id, "node.attempt", "think", 1, 21.0, 20.0, "succeeded", 1000.0
            ),
            sources.Event(2, run_id, workflow_id, "node.attempt", "after", 1, 21.5, 21.1, "succeeded", 400.0),
            sources.Event(3, run_id, workflow_id, "run.succeeded", "", 0, 22.0, None, None, None),
        ]
    )
    export.flush()
    spans: dict[str, Span] = {s.name: s for s in receiver.wait_for(lambda got: len(got) >= 5)}
    export.shutdown()
    assert set(spans) == {
        f"run {run_id}",
        "node think",
        "node after",
        "chat claude-sonnet-4-5",
        "execute_tool demo.get_weather",
    }
    kinds = {name: span.attributes["openinference.span.kind"] for name, span in spans.items()}
    assert kinds == {
        f"run {run_id}": "CHAIN",
        "node think": "AGENT",
        "node after": "CHAIN",
        "chat claude-sonnet-4-5": "LLM",
        "execute_tool demo.get_weather": "TOOL",
    }

    llm = spans["chat claude-sonnet-4-5"].attributes
    assert llm["gen_ai.request.model"] == "claude-sonnet-4-5"  # the GenAI attributes stay
    assert llm["gen_ai.usage.input_tokens"] == 1030 and llm["gen_ai.usage.cache_read.input_tokens"] == 1000
    assert llm["llm.model_name"] == "claude-sonnet-4-5-20250929"
    assert (llm["llm.token_count.prompt"], llm["llm.token_count.completion"]) == (1030, 12)
    assert llm["llm.token_count.total"] == 1042
    assert llm["llm.token_count.prompt_details.cache_read"] == 1000
    assert spans["execute_tool demo.get_weather"].attributes["tool.name"] == "demo.get_weather"

    trace = f"{traceids.trace_id(run_id):032x}"
    agent = spans["node think"]
    assert {s.trace_id for s in spans.values()} == {trace}
    assert agent.span_id == f"{traceids.attempt_span_id(run_id, 'think', 1):016x}"
    assert spans["chat claude-sonnet-4-5"].parent_span_id == agent.span_id
    assert spans["execute_tool demo.get_weather"].parent_span_id == agent.span_id
    assert agent.parent_span_id == spans[f"run {run_id}"].span_id
    assert agent.resource["service.name"] == "switchyard-test"


PHOENIX = os.environ.get("SWITCHYARD_TEST_PHOENIX_URL", "")


def events_of(run_id: int, workflow_id: int) -> list[sources.Event]:
    return [
        sources.Event(1, run_id, workflow_id, "node.attempt", "think", 1, 21.0, 20.0, "succeeded", 1000.0),
        sources.Event(2, run_id, workflow_id, "node.attempt", "after", 1, 21.5, 21.1, "succeeded", 400.0),
        sources.Event(3, run_id, workflow_id, "run.succeeded", "", 0, 22.0, None, None, None),
    ]


@pytest.mark.skipif(
    not PHOENIX,
    reason="SWITCHYARD_TEST_PHOENIX_URL names no running Arize Phoenix (docs/production/observability.md)",
)
def test_arize_phoenix_receives_the_spans_and_reads_their_kinds(db: None) -> None:
    """Against a real OTLP/HTTP receiver that knows OpenInference, when one is running."""
    import httpx

    run_id, workflow_id = an_agent_run(db)
    export = tracing.OtlpExport(PHOENIX, "switchyard-test")
    export.export(events_of(run_id, workflow_id))
    export.flush()
    export.shutdown()
    trace = f"{traceids.trace_id(run_id):032x}"
    deadline, found = time.monotonic() + 30, {}
    while time.monotonic() < deadline and len(found) < 5:
        answer = httpx.get(f"{PHOENIX}/v1/projects/default/spans", params={"limit": 1000}).json()
        found = {s["name"]: s for s in answer["data"] if s["context"]["trace_id"] == trace}
        time.sleep(0.5)
    assert {name: span["span_kind"] for name, span in found.items()} == {
        f"run {run_id}": "CHAIN",
        "node think": "AGENT",
        "node after": "CHAIN",
        "chat claude-sonnet-4-5": "LLM",
        "execute_tool demo.get_weather": "TOOL",
    }


def test_the_receiver_refuses_what_is_not_otlp_protobuf(receiver: OtlpReceiver) -> None:
    import httpx

    answer = httpx.post(receiver.endpoint + "/v1/traces", json={"resourceSpans": []})
    assert answer.status_code == 415 and receiver.spans == []
