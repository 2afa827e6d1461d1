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

from workflows.models import Run

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

    def flush(self) -> None:
        self.processor.force_flush()

    def shutdown(self) -> None:
        self.processor.shutdown()

    def span(self, name: str, span_id: int, parent: int | None, e: Any, start: float, ok: bool) -> Any:
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

        def context(span: int) -> SpanContext:
            return SpanContext(
                trace_id(e.run_id), span, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED)
            )

        attributes = {"switchyard.run_id": e.run_id, "switchyard.workflow_id": e.workflow_id}
        if e.node_id:
            attributes.update({"switchyard.node_id": e.node_id, "switchyard.attempt": e.attempt})
        return ReadableSpan(
            name=name,
            context=context(span_id),
            parent=context(parent) if parent else None,
            resource=self.resource,
            attributes=attributes,
            kind=SpanKind.INTERNAL,
            status=Status(StatusCode.OK if ok else StatusCode.ERROR),
            start_time=nanos(start),
            end_time=nanos(e.at),
        )

    def node_span(self, e: Any) -> Any:
        ok = e.status == "succeeded"
        return self.span(f"node {e.node_id}", event_span_id(e.id), run_span_id(e.run_id), e, e.started_at, ok)

    def run_span(self, e: Any, created: float) -> Any:
        return self.span(
            f"run {e.run_id}", run_span_id(e.run_id), None, e, created, e.kind == "run.succeeded"
        )


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
