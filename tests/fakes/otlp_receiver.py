"""An OTLP/HTTP trace receiver on a real local socket, decoding with the official protobufs.

    with OtlpReceiver() as receiver:
        ...  # OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint
        spans = receiver.wait_for(lambda spans: len(spans) >= 3)

It takes `POST /v1/traces` as the OTLP/HTTP specification says (binary protobuf
`ExportTraceServiceRequest`, gzip or not; JSON-encoded OTLP is answered 415 here) and
answers an empty `ExportTraceServiceResponse`. The decoding is the `opentelemetry-proto`
package's (the OpenTelemetry project's generated classes), not ours; what it keeps of each
span (`Span`: name, ids as hex, parent, kind, status, attributes decoded from AnyValue, the
resource's attributes) is what tests assert on.

Why this and not a collector: no OTLP receiver installable from PyPI or npm runs here
without a download of its own (the OpenTelemetry Collector and Jaeger are Go binaries);
Arize Phoenix (PyPI) is one, and docs/production/observability.md says how it was checked
against it by hand.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tests.fakes.quiet import QuietHandler, QuietServer


@dataclass(frozen=True)
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    status_code: int
    attributes: dict[str, Any]
    resource: dict[str, Any] = field(default_factory=dict)


def value_of(value: AnyValue) -> Any:
    """An attribute's AnyValue as Python."""
    which = value.WhichOneof("value")
    if which == "array_value":
        return [value_of(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: value_of(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, which) if which else None


def spans_of(request: ExportTraceServiceRequest) -> list[Span]:
    found = []
    for resource_spans in request.resource_spans:
        resource = {kv.key: value_of(kv.value) for kv in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                found.append(
                    Span(
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        kind=span.kind,
                        status_code=span.status.code,
                        attributes={kv.key: value_of(kv.value) for kv in span.attributes},
                        resource=resource,
                    )
                )
    return found


class _Server(QuietServer):
    receiver: OtlpReceiver


class _Handler(QuietHandler):
    server: _Server

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path != "/v1/traces":
            return self.answer(404, b"")
        if self.headers.get("Content-Type", "").split(";")[0].strip() != "application/x-protobuf":
            return self.answer(415, b"")
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.server.receiver.add(spans_of(request))
        self.answer(200, ExportTraceServiceResponse().SerializeToString())

    def answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class OtlpReceiver:
    """Receive OTLP/HTTP trace exports on 127.0.0.1; keep every span."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.requests = 0
        self._lock = threading.Lock()
        self._server: _Server | None = None

    @property
    def endpoint(self) -> str:
        """The base URL an exporter is given (it posts to /v1/traces under it)."""
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def add(self, spans: list[Span]) -> None:
        with self._lock:
            self.spans.extend(spans)
            self.requests += 1

    def wait_for(self, enough: Callable[[list[Span]], bool], timeout: float = 15.0) -> list[Span]:
        """The spans received, once `enough` holds of them (a process boundary: poll with a deadline)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                spans = list(self.spans)
            if enough(spans):
                return spans
            time.sleep(0.05)
        raise AssertionError(f"the receiver got {len(self.spans)} spans, not what was waited for")

    def __enter__(self) -> OtlpReceiver:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.receiver = self
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
