"""Runs: start (idempotent), list, read with every node, cancel, history and trace."""

from __future__ import annotations

from django.http import HttpResponse

from workflows import runs, versions
from workflows.api import serializers as s
from workflows.api.errors import ApiError, FieldError
from workflows.api.pagination import paginate
from workflows.api.routing import Call, render
from workflows.models import DeadLetter, NodeRun, Run, RunEvent

IDEMPOTENCY_HEADER = "Idempotency-Key"


def start_run(call: Call, slug: str) -> HttpResponse:
    """Start a run of the active version. With Idempotency-Key, the same key and input answer
    the run made the first time (200) and the same key with another input is refused (409)."""
    workflow = versions.get_workflow(slug)
    key = call.headers.get(IDEMPOTENCY_HEADER)
    run, created = runs.start_run(workflow, call.body.input, idempotency_key=key)
    run.workflow, run.version = workflow, workflow.active_version  # type: ignore[assignment]
    if run.version_id != workflow.active_version_id:  # an earlier start, on an older version
        run = runs.get_run(run.pk)
    data = s.run_summary(run)
    headers = {"Location": data["url"]}
    if not created:
        headers["Idempotent-Replayed"] = "true"
    return render(data, 201 if created else 200, headers)


def list_runs(call: Call) -> HttpResponse:
    """List runs, newest first, filtered by workflow, status, version and creation time."""
    q = call.query
    if q.version is not None and q.workflow is None:
        message = "needs workflow: version numbers are per workflow"
        raise ApiError(400, f"version {message}.", [FieldError("query", "version", message)])
    lookups = {
        "workflow__slug": q.workflow,
        "status": q.status,
        "version__number": q.version,
        "created_at__gt": q.created_after,
        "created_at__lt": q.created_before,
    }
    rows = Run.objects.select_related("workflow", "version").filter(
        **{k: v for k, v in lookups.items() if v is not None}
    )
    return render(paginate(rows, q, "id", s.run_summary))


def get_run(call: Call, run_id: int) -> HttpResponse:
    """Read a run with every node's state, attempts, timings, output and error."""
    run = runs.get_run(run_id)
    nodes = list(NodeRun.objects.filter(run_id=run_id).order_by("id"))
    letters = list(DeadLetter.objects.filter(run_id=run_id).order_by("id").values_list("id", flat=True))
    return render(s.run(run, nodes, letters))


def cancel_run(call: Call, run_id: int) -> HttpResponse:
    """Cancel a running or waiting run: queued nodes never start, running results are ignored."""
    runs.cancel_run(run_id, call.body.reason, user=call.key)
    return render(s.run_summary(runs.get_run(run_id)))


def run_events(call: Call, run_id: int) -> HttpResponse:
    """Read a run's history, oldest first: starts, attempts, retries, deaths, replays, cancels."""
    runs.get_run(run_id)
    events = RunEvent.objects.filter(run_id=run_id)
    return render(paginate(events, call.query, "id", s.event, descending=False))


def run_trace(call: Call, run_id: int) -> HttpResponse:
    """Read a run's trace: one span per node attempt, in the order they finished."""
    runs.get_run(run_id)
    spans = RunEvent.objects.filter(run_id=run_id, kind="node.attempt").order_by("id")
    return render({"run": run_id, "spans": [s.span(e) for e in spans]})
