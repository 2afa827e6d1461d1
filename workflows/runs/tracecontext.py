"""W3C trace context: a run started with a `traceparent` continues the caller's trace.

`start_run` stores the caller's trace id and span id beside the run, in the transaction
that creates it, so the exporter (monitoring/services/tracing.py) never sees the run without them:
the run's span becomes a child of the caller's span and every node span follows. An invalid
header is ignored, as the W3C recommendation asks (the run gets a trace of its own).
"""

from __future__ import annotations

import re
from typing import Any

from django.db import transaction

from workflows.runs import actions as runs
from workflows.store.models import Run, RunTraceParent

TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")


def parse(header: str | None) -> tuple[str, str] | None:
    """Return (trace id, parent span id) of a valid `traceparent`, else None."""
    match = TRACEPARENT.match((header or "").strip().lower())
    if match is None:
        return None
    version, trace_id, span_id, _, rest = match.groups()
    if version == "ff" or (version == "00" and rest) or set(trace_id) == {"0"} or set(span_id) == {"0"}:
        return None
    return trace_id, span_id


def start_run(workflow: Any, run_input: Any, traceparent: str | None, **options: Any) -> tuple[Run, bool]:
    """`runs.start_run`, remembering the caller's trace context with a new run."""
    parent = parse(traceparent)
    if parent is None:
        return runs.start_run(workflow, run_input, **options)
    with transaction.atomic():
        run, created = runs.start_run(workflow, run_input, **options)
        if created:
            RunTraceParent.objects.create(run=run, trace_id=parent[0], parent_span_id=parent[1])
    return run, created


def start_runs(workflow: Any, items: Any, traceparent: str | None, **options: Any) -> list[tuple[Run, bool]]:
    """`runs.start_runs`, remembering the caller's trace context with every new run."""
    parent = parse(traceparent)
    if parent is None:
        return runs.start_runs(workflow, items, **options)
    with transaction.atomic():
        started = runs.start_runs(workflow, items, **options)
        RunTraceParent.objects.bulk_create(
            RunTraceParent(run=run, trace_id=parent[0], parent_span_id=parent[1])
            for run, created in started
            if created
        )
    return started
