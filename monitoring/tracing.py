"""OpenTelemetry export of run traces, when OTEL_EXPORTER_OTLP_ENDPOINT is set.

One trace per run, one span per node attempt (a child of the run's span), run and node ids
as attributes. Spans are built after the fact by the broadcaster from the run events it
reads anyway (every attempt's start and end are stored in Postgres), so workers never wait
on a collector. Trace and span ids are derived from the run id and the event id, so the
spans of a run join one trace whichever process exports them. The exporter (OTLP over
HTTP, batched in a background thread) is an optional dependency: requirements-otel.txt.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any, Protocol

from django.conf import settings

from workflows.core.agent import FAILED, TURN
from workflows.models import AgentStep, Run

log = logging.getLogger(__name__)
RUN_FINISHED = {"run.succeeded", "run.failed", "run.cancelled"}


class Exporter(Protocol):
    def export(self, batch: list[Any]) -> None: ...


class NoExport:
    def export(self, batch: list[Any]) -> None:
        """Tracing is off: nothing to do."""


def id_from(text: str, bits: int) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[: bits // 8], "big") or 1


def trace_id(run_id: int) -> int:
    return id_from(f"switchyard:run:{run_id}", 128)


def run_span_id(run_id: int) -> int:
    return id_from(f"switchyard:run-span:{run_id}", 64)


def event_span_id(event_id: int) -> int:
    return id_from(f"switchyard:event:{event_id}", 64)


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
        for e in batch:
            if e.kind == "node.attempt" and e.started_at is not None:
                self.processor.on_end(self.node_span(e))
            elif e.kind in RUN_FINISHED and e.run_id in created:
                self.processor.on_end(self.run_span(e, created[e.run_id].timestamp()))
        for e, step in agent_steps_of(batch):
            self.processor.on_end(self.step_span(e, step))

    def flush(self) -> None:
        self.processor.force_flush()

    def shutdown(self) -> None:
        self.processor.shutdown()

    def span(
        self,
        name: str,
        span_id: int,
        parent: int | None,
        e: Any,
        start: float,
        ok: bool,
        end: float | None = None,
        extra: dict[str, Any] | None = None,
    ) -> Any:
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

        def context(span: int) -> SpanContext:
            return SpanContext(
                trace_id(e.run_id), span, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED)
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
        return self.span(f"node {e.node_id}", event_span_id(e.id), run_span_id(e.run_id), e, e.started_at, ok)

    def step_span(self, e: Any, step: AgentStep) -> Any:
        """An agent node's turn or tool call, a child of its attempt's span, with the
        OpenTelemetry GenAI attributes (a model call is `chat <model>`, a tool call
        `execute_tool <tool>`)."""
        name = f"chat {step.model}" if step.kind == TURN else f"execute_tool {step.tool or step.call_id}"
        start, end = step.started_at.timestamp(), step.finished_at.timestamp()
        parent = event_span_id(e.id)
        ok = step.status != FAILED
        return self.span(name, step_span_id(step.pk), parent, e, start, ok, end, step_attributes(step))

    def run_span(self, e: Any, created: float) -> Any:
        return self.span(
            f"run {e.run_id}", run_span_id(e.run_id), None, e, created, e.kind == "run.succeeded"
        )


def step_span_id(step_id: int) -> int:
    return id_from(f"switchyard:agent-step:{step_id}", 64)


def step_attributes(step: AgentStep) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "switchyard.step.seq": step.seq,
        "switchyard.step.kind": step.kind,
        "switchyard.step.status": step.status,
        "switchyard.step.idempotency_key": step.idempotency_key,
    }
    if step.kind == TURN:
        attributes.update({"gen_ai.operation.name": "chat", "gen_ai.request.model": step.model})
        if step.finish_reason:
            attributes["gen_ai.response.finish_reasons"] = (step.finish_reason,)
        for key, value in (("input", step.input_tokens), ("output", step.output_tokens)):
            if value is not None:
                attributes[f"gen_ai.usage.{key}_tokens"] = value
    else:
        attributes.update(
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": step.tool,
                "gen_ai.tool.call.id": step.call_id,
            }
        )
    if step.error:
        attributes["error.type"] = step.error[:200]
    return attributes


def agent_steps_of(batch: list[Any]) -> list[tuple[Any, AgentStep]]:
    """The agent steps of the node attempts in a batch, each with its attempt's event (one query)."""
    attempts = {
        (e.run_id, e.node_id, e.attempt): e for e in batch if e.kind == "node.attempt" and e.started_at
    }
    if not attempts:
        return []
    steps = AgentStep.objects.filter(
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
