"""OpenTelemetry export of run traces, when OTEL_EXPORTER_OTLP_ENDPOINT is set.

One trace per run, one span per node attempt (a child of the run's span), run and node ids
as attributes. Spans are built after the fact by the broadcaster from the run events it
reads anyway (every attempt's start and end are stored in Postgres), so workers never wait
on a collector. Trace and span ids are derived from the run id and the event id, so the
spans of a run join one trace whichever process exports them. The exporter (OTLP over
HTTP, batched in a background thread) is an optional dependency: requirements-otel.txt.

A run started with a W3C `traceparent` (workflows/runs/tracecontext.py) joins the caller's trace:
its trace id is the caller's and its span a child of the caller's span. A child run joins
its parent run's trace the same way, under the attempt or the agent's tool call that started
it, so a workflow and the workflows it calls are one trace. Each LLM call of an
attempt is a child span of the attempt's, with the OpenTelemetry GenAI attributes
(gen_ai.system, gen_ai.request.model, gen_ai.response.model, gen_ai.usage.*_tokens,
gen_ai.response.finish_reasons).

Beside the GenAI attributes, each span says what it is in OpenInference's words
(`openinference.span.kind`), which Arize Phoenix and other LLM observability tools group by:
CHAIN for a run and for a node attempt of any kind but an agent's, AGENT for an `llm.agent`
attempt, LLM for each model call (with `llm.model_name` and `llm.token_count.*`), TOOL for
an agent's tool call (`tool.name`). A node's kind is read from its run's pinned version
(store/graphs.py caches the parsed graph).
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from django.conf import settings

from workflows.core.agent import FAILED, TOOL
from workflows.core.graph import AGENT
from workflows.store.graphs import load_graph
from workflows.store.models import AgentStep, LLMCall, Run
from workflows.store.traceids import (  # noqa: F401 - the id scheme lives in the store, for the workers too
    attempt_span_id,
    id_from,
    run_span_id,
    step_span_id,
    trace_id,
    trace_parents,
)

log = logging.getLogger(__name__)
RUN_FINISHED = {"run.succeeded", "run.failed", "run.cancelled"}
# OpenInference's span kinds (openinference-semantic-conventions, `OpenInferenceSpanKindValues`).
SPAN_KIND = "openinference.span.kind"
# LLM spans exported per attempt: a map node's items may have made thousands of calls, all
# recorded under its attempt (the run page's node panel lists the first ones too).
LLM_SPANS_PER_ATTEMPT = 100
CHAIN, AGENT_SPAN, LLM_SPAN, TOOL_SPAN = "CHAIN", "AGENT", "LLM", "TOOL"


class Exporter(Protocol):
    def export(self, batch: list[Any]) -> None: ...


class NoExport:
    def export(self, batch: list[Any]) -> None:
        """Tracing is off: nothing to do."""


def llm_span_id(call_id: int) -> int:
    return id_from(f"switchyard:llm-call:{call_id}", 64)


def genai_attributes(call: LLMCall) -> dict[str, Any]:
    """The OpenTelemetry GenAI semantic conventions' attributes of one call."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": call.provider,
        "gen_ai.request.model": call.model,
        "gen_ai.response.model": call.response_model or call.model,
        "switchyard.llm.demo": call.demo,
    }
    if call.input_tokens is not None:
        attributes["gen_ai.usage.input_tokens"] = call.input_tokens
    if call.output_tokens is not None:
        attributes["gen_ai.usage.output_tokens"] = call.output_tokens
    if call.finish_reason:
        attributes["gen_ai.response.finish_reasons"] = [call.finish_reason]
    if call.step:
        attributes["switchyard.llm.step"] = call.step
    if call.cost is not None:
        attributes["switchyard.llm.cost"] = float(call.cost)
    if call.first_token_ms is not None:
        attributes["switchyard.llm.time_to_first_token_ms"] = call.first_token_ms
    if call.cache_read_tokens is not None:
        attributes["gen_ai.usage.cache_read.input_tokens"] = call.cache_read_tokens
    if call.cache_write_tokens is not None:
        attributes["gen_ai.usage.cache_creation.input_tokens"] = call.cache_write_tokens
    return {**attributes, **openinference_llm_attributes(call)}


def openinference_llm_attributes(call: LLMCall) -> dict[str, Any]:
    """The OpenInference attributes of one model call: its kind, model and token counts."""
    attributes: dict[str, Any] = {SPAN_KIND: LLM_SPAN, "llm.model_name": call.response_model or call.model}
    counts = {"prompt": call.input_tokens, "completion": call.output_tokens}
    attributes.update({f"llm.token_count.{k}": v for k, v in counts.items() if v is not None})
    if call.input_tokens is not None and call.output_tokens is not None:
        attributes["llm.token_count.total"] = call.input_tokens + call.output_tokens
    if call.cache_read_tokens is not None:
        attributes["llm.token_count.prompt_details.cache_read"] = call.cache_read_tokens
    if call.cache_write_tokens is not None:
        attributes["llm.token_count.prompt_details.cache_write"] = call.cache_write_tokens
    return attributes


def nanos(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


class OtlpExport:
    """Turn run events into spans and hand them to a batching OTLP exporter."""

    def __init__(self, endpoint: str, service_name: str, exporter: Any = None) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        self.resource = Resource.create({"service.name": service_name})
        target = exporter or OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")
        self.processor = BatchSpanProcessor(target, schedule_delay_millis=1000)

    def export(self, batch: list[Any]) -> None:
        finished = [e for e in batch if e.kind in RUN_FINISHED]
        created = dict(
            Run.objects.filter(pk__in=[e.run_id for e in finished]).values_list("id", "created_at")
        )
        self.parents = trace_parents({e.run_id for e in batch})
        attempts = [e for e in batch if e.kind == "node.attempt" and e.started_at is not None]
        calls = self.llm_calls(attempts)
        self.versions = dict(
            Run.objects.filter(pk__in={e.run_id for e in attempts}).values_list("id", "version_id")
        )
        for e in batch:
            if e.kind == "node.attempt" and e.started_at is not None:
                self.processor.on_end(self.node_span(e))
                for call in calls.get((e.run_id, e.node_id, e.attempt), [])[:LLM_SPANS_PER_ATTEMPT]:
                    self.processor.on_end(self.llm_span(e, call))
            elif e.kind in RUN_FINISHED and e.run_id in created:
                self.processor.on_end(self.run_span(e, created[e.run_id].timestamp()))
        for e, step in agent_tool_calls(batch):
            self.processor.on_end(self.tool_span(e, step))

    def llm_calls(self, attempts: list[Any]) -> dict[tuple[int, str, int], list[LLMCall]]:
        """The LLM calls of these attempts, in one query."""
        found: dict[tuple[int, str, int], list[LLMCall]] = {}
        if not attempts:
            return found
        wanted = {(e.run_id, e.node_id, e.attempt) for e in attempts}
        for call in LLMCall.objects.filter(run_id__in={e.run_id for e in attempts}).order_by("id"):
            key = (call.run_id, call.node_id, call.attempt)
            if key in wanted:
                found.setdefault(key, []).append(call)
        return found

    def flush(self) -> None:
        self.processor.force_flush()

    def shutdown(self) -> None:
        self.processor.shutdown()  # type: ignore[no-untyped-call]  # OpenTelemetry's BatchSpanProcessor.shutdown has no annotations

    parents: dict[int, tuple[int, int]] = {}
    versions: dict[int, int] = {}  # run id -> its pinned version id, for the attempts' kinds

    def attempt_kind(self, e: Any) -> str:
        """AGENT for an `llm.agent` attempt, CHAIN for any other node's (or one not found)."""
        version = self.versions.get(e.run_id)
        node = load_graph(version).nodes.get(e.node_id) if version is not None else None
        return AGENT_SPAN if node is not None and node.kind == AGENT else CHAIN

    def span(
        self,
        name: str,
        span_id: int,
        parent: int | None,
        e: Any,
        start: float,
        ok: bool,
        extra: dict[str, Any] | None = None,
        end: float | None = None,
    ) -> Any:
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

        def context(span: int) -> SpanContext:
            return SpanContext(
                trace_id(e.run_id, self.parents),
                span,
                is_remote=span == self.parents.get(e.run_id, (0, 0))[1],
                trace_flags=TraceFlags(TraceFlags.SAMPLED),
            )

        attributes = {"switchyard.run_id": e.run_id, "switchyard.workflow_id": e.workflow_id}
        if e.node_id:
            attributes.update({"switchyard.node_id": e.node_id, "switchyard.attempt": e.attempt})
        attributes.update(extra or {})
        return ReadableSpan(
            name=name,
            context=context(span_id),
            parent=context(parent) if parent else None,
            resource=self.resource,
            attributes=attributes,
            kind=SpanKind.INTERNAL,
            status=Status(StatusCode.OK if ok else StatusCode.ERROR),
            start_time=nanos(start),
            end_time=nanos(e.at if end is None else end),
        )

    def node_span(self, e: Any) -> Any:
        ok = e.status == "succeeded"
        span_id = attempt_span_id(e.run_id, e.node_id, e.attempt)
        kind = {SPAN_KIND: self.attempt_kind(e)}
        return self.span(f"node {e.node_id}", span_id, run_span_id(e.run_id), e, e.started_at, ok, kind)

    def tool_span(self, e: Any, step: AgentStep) -> Any:
        """An agent's tool call, `execute_tool <tool>` as the GenAI conventions name it, a
        child of its attempt's span beside the attempt's model turns (its LLM calls)."""
        start, end = step.started_at.timestamp(), step.finished_at.timestamp()
        name = f"execute_tool {step.tool or step.call_id}"
        ok = step.status != FAILED
        return self.span(
            name,
            step_span_id(step.pk),
            attempt_span_id(e.run_id, e.node_id, e.attempt),
            e,
            start,
            ok,
            extra=tool_attributes(step),
            end=end,
        )

    def run_span(self, e: Any, created: float) -> Any:
        caller = self.parents.get(e.run_id, (0, None))[1]
        return self.span(
            f"run {e.run_id}",
            run_span_id(e.run_id),
            caller,
            e,
            created,
            e.kind == "run.succeeded",
            {SPAN_KIND: CHAIN},
        )

    def llm_span(self, e: Any, call: LLMCall) -> Any:
        """A child of the attempt's span: `chat <model>`, as the GenAI conventions name it."""
        end = call.created_at.timestamp()
        start = end - call.latency_ms / 1000
        attributes = genai_attributes(call)
        span_id = llm_span_id(call.pk)
        return self.span(
            f"chat {call.model}",
            span_id,
            attempt_span_id(e.run_id, e.node_id, e.attempt),
            e,
            start,
            not call.error,
            attributes,
            end,
        )


def tool_attributes(step: AgentStep) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        SPAN_KIND: TOOL_SPAN,
        "tool.name": step.tool,
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": step.tool,
        "gen_ai.tool.call.id": step.call_id,
        "switchyard.step.seq": step.seq,
        "switchyard.step.status": step.status,
        "switchyard.step.idempotency_key": step.idempotency_key,
    }
    if step.error:
        attributes["error.type"] = step.error[:200]
    return attributes


def agent_tool_calls(batch: list[Any]) -> list[tuple[Any, AgentStep]]:
    """The agents' tool calls of the node attempts in a batch, each with its attempt's event
    (one query). Their model turns are LLM calls, exported as such (llm_span)."""
    attempts = {
        (e.run_id, e.node_id, e.attempt): e for e in batch if e.kind == "node.attempt" and e.started_at
    }
    if not attempts:
        return []
    steps = AgentStep.objects.filter(
        kind=TOOL,
        node_run__run_id__in={run for run, _, _ in attempts},
        node_run__node_id__in={n for _, n, _ in attempts},
    ).select_related("node_run")
    found = []
    for step in steps.order_by("node_run_id", "seq"):
        e = attempts.get((step.node_run.run_id, step.node_run.node_id, step.attempt))
        if e is not None:
            found.append((e, step))
    return found


def exporter() -> Exporter:
    """Return the span exporter the settings ask for (none unless an endpoint is set)."""
    endpoint = settings.MONITOR["OTLP_ENDPOINT"]
    if not endpoint:
        return NoExport()
    try:
        return OtlpExport(endpoint, settings.MONITOR["OTEL_SERVICE_NAME"])
    except ImportError:
        log.warning(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set but OpenTelemetry is not installed: "
            "pip install -r requirements-otel.txt (traces are not exported)"
        )
        return NoExport()
