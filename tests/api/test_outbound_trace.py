"""http.request carries the W3C trace context: the run's trace (the caller's, when the run was
started with one) and the attempt's span as the parent, through a real worker."""

from __future__ import annotations

import re

from tests.integration.conftest import node, publish, wait_finished
from tests.integration.runtime import Runtime
from tests.integration.test_http_handlers import (
    Scripted,
    server,  # noqa: F401 - the fixture
    url,
)
from workflows.runs import actions as runs, tracecontext
from workflows.store import traceids

CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_http_request_sends_the_runs_trace_and_the_attempts_span(
    runtime: Runtime,
    server: Scripted,  # noqa: F811 - the fixture imported above
) -> None:
    workflow = publish(
        "traced", {"nodes": [node("call", "http.request", config={"url": url(server, "/json")})], "edges": []}
    )
    joined, _ = tracecontext.start_run(workflow, {}, CALLER)
    own, _ = runs.start_run(workflow, {})
    wait_finished(joined)
    wait_finished(own)
    sent = [r["headers"]["traceparent"] for r in server.seen]
    states = {r["headers"]["tracestate"] for r in server.seen}
    assert states == {f"switchyard=r:{joined.pk}", f"switchyard=r:{own.pk}"}
    assert all(re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-01", s) for s in sent)
    assert (
        f"00-4bf92f3577b34da6a3ce929d0e0e4736-{traceids.attempt_span_id(joined.pk, 'call', 1):016x}-01"
        in sent
    )
    assert (
        f"00-{traceids.trace_id(own.pk):032x}-{traceids.attempt_span_id(own.pk, 'call', 1):016x}-01" in sent
    )
