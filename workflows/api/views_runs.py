"""Runs: start (idempotent), list, read with every node, cancel, history and trace."""

from __future__ import annotations

from typing import Annotated, Any

from django.http import HttpRequest, HttpResponse
from ninja import Header, Path, Query, Router, Status

from workflows.api import inputs as i, serializers as s
from workflows.api.auth import ApiRequest, allowed, authorize_actor
from workflows.api.errors import ApiError, FieldError
from workflows.api.pagination import paginate
from workflows.api.parsing import MAX_ID
from workflows.api.schema import refuses
from workflows.forks import forking
from workflows.llm import usage
from workflows.runs import actions as runs, mapitems, search as runsearch, tracecontext, waiting
from workflows.runtime import parents as childlinks
from workflows.store.errors import Invalid
from workflows.store.models import ApiKey, DeadLetter, NodeRun, Run, RunEvent
from workflows.versions import editing, publish as versions

router = Router(tags=["runs"])
SlugPath = Annotated[str, Path(pattern=i.SLUG_PATTERN)]
RunId = Annotated[int, Path(ge=1, le=MAX_ID)]
NumberPath = Annotated[int, Path(ge=1, le=MAX_ID)]


@router.post(
    "/workflows/{slug:slug}/runs",
    response={201: s.RunSummary, 200: s.RunSummary},
    auth=allowed("start_run"),
    summary="Start a run",
)
@refuses(404, 409)
def start_run(
    request: HttpRequest,
    response: HttpResponse,
    slug: SlugPath,
    body: i.StartRunIn = i.EMPTY_START,
    idempotency_key: Annotated[i.IdempotencyKey | None, Header(alias="Idempotency-Key")] = None,
) -> Any:
    """Start a run of the active version. With Idempotency-Key, the same key and input answer
    the run made the first time (200) and the same key with another input is refused (409).
    A W3C `traceparent` header makes the run's trace a part of the caller's."""
    traceparent = request.headers.get("traceparent")
    options = {
        "idempotency_key": idempotency_key,
        "priority": body.priority,
        "as_read": True,
        "api_key_id": key_of(request),
    }
    try:
        workflow = versions.get_workflow_to_start(slug, cached=True)
        run, created = tracecontext.start_run(workflow, body.input, traceparent, **options)
    except runs.StaleWorkflow:  # published, or its default priority changed, since this process read it
        workflow = versions.get_workflow_to_start(slug)
        run, created = tracecontext.start_run(workflow, body.input, traceparent, **options)
    run.workflow, run.version = workflow, workflow.active_version  # type: ignore[assignment]  # active_version is Optional in the model; a startable workflow always has one
    if run.version_id != workflow.active_version_id:  # an earlier start, on an older version
        run = runs.get_run(run.pk)
    data = s.run_summary(run)
    response["Location"] = data["url"]
    if not created:
        response["Idempotent-Replayed"] = "true"
    return Status(201 if created else 200, data)


@router.post(
    "/workflows/{slug:slug}/versions/{id:number}/test-runs",
    response={201: s.RunOut},
    auth=allowed("start_run"),
    summary="Start a test run of a version",
)
@refuses(404, 409)
def start_test_run(
    request: ApiRequest,
    response: HttpResponse,
    slug: SlugPath,
    number: NumberPath,
    body: i.StartRunIn = i.EMPTY_START,
) -> Any:
    """Start a run pinned to this version, active or not; live traffic is unaffected. A draft
    is first frozen into a published, inactive "test-run snapshot" version (reused while the
    draft is unchanged), which the run is pinned to: testing a draft also needs the editor
    role (the `edit` scope for a key). The answer is the run with every node, as GET /runs/{id}."""
    version = editing.get_version(versions.get_workflow(slug), number)
    if not version.is_published:
        authorize_actor(request, "publish")
    run = editing.start_test_run(version, body.input, user=request.auth)
    response["Location"] = s.run_summary(run)["url"]
    return Status(201, read_run(run.pk))


@router.get("/runs", response=s.RunPage, auth=allowed("view"), summary="List runs")
def list_runs(request: HttpRequest, q: Query[i.RunQuery]) -> Any:
    """List runs, newest first, filtered by workflow, status, version, creation time, priority,
    input values (`input=customer=acme order.total=12`: JSONB containment), error text and the node
    that died."""
    if q.version is not None and q.workflow is None:
        message = "needs workflow: version numbers are per workflow"
        raise ApiError(400, f"version {message}.", [FieldError("query", "version", message)])
    try:
        search = runsearch.RunSearch(
            status=q.status or "",
            workflow=q.workflow or "",
            version=q.version,
            created_after=q.created_after,
            created_before=q.created_before,
            input=runsearch.parse_input_terms(q.input or ""),
            error=q.error or "",
            node=q.node_id or "",
            priority=q.priority_min,
            include_tests=q.include_tests,
        )
    except Invalid as exc:
        raise ApiError(400, exc.message, [FieldError("query", "input", exc.message)]) from None
    rows = search.apply(Run.objects.select_related("workflow", "version", "fork"))
    # created_after is exclusive in the API (inclusive on the page): keep the API's meaning.
    if q.created_after is not None:
        rows = rows.exclude(created_at=q.created_after)
    return paginate(rows, q, "id", s.listed_run)


@router.get(
    "/runs/{id:run_id}", response=s.RunOut, auth=allowed("view"), summary="Read a run with every node"
)
@refuses(404)
def get_run(request: HttpRequest, run_id: RunId) -> Any:
    """Read a run with every node's state, attempts, timings, output and error."""
    return read_run(run_id)


def read_run(run_id: int) -> s.RunOut:
    run = runs.get_run(run_id)
    nodes = list(NodeRun.objects.filter(run_id=run_id).order_by("id"))
    letters = list(DeadLetter.objects.filter(run_id=run_id).order_by("id").values_list("id", flat=True))
    progress = mapitems.progress(n.pk for n in nodes)
    waits = waiting.waiting_for([run]).get(run.pk, [])
    family, llm = childlinks.family(run_id), usage.run_usage(run_id)
    fork, forks = forking.origin_of(run_id), forking.forks_of(run_id)
    return s.run(run, nodes, letters, family, llm, progress, waits, fork, forks)


@router.post(
    "/runs/{id:run_id}/cancel", response=s.RunSummary, auth=allowed("cancel_run"), summary="Cancel a run"
)
@refuses(404, 409)
def cancel_run(request: ApiRequest, run_id: RunId, body: i.CancelIn = i.EMPTY_CANCEL) -> Any:
    """Cancel a running or waiting run: queued nodes never start, running results are ignored."""
    runs.cancel_run(run_id, body.reason, user=request.auth)
    return s.run_summary(runs.get_run(run_id))


@router.get(
    "/runs/{id:run_id}/events", response=s.EventPage, auth=allowed("view"), summary="Read a run's history"
)
@refuses(404)
def run_events(request: HttpRequest, run_id: RunId, q: Query[i.EventQuery]) -> Any:
    """Read a run's history, oldest first: starts, attempts, retries, deaths, replays, cancels."""
    runs.get_run(run_id)
    events = RunEvent.objects.filter(run_id=run_id)
    return paginate(events, q, "id", s.event, descending=False)


@router.get(
    "/runs/{id:run_id}/trace", response=s.TraceOut, auth=allowed("view"), summary="Read a run's trace (spans)"
)
@refuses(404)
def run_trace(request: HttpRequest, run_id: RunId) -> Any:
    """Read a run's trace: one span per node attempt, in the order they finished."""
    runs.get_run(run_id)
    spans = RunEvent.objects.filter(run_id=run_id, kind="node.attempt").order_by("id")
    return {"run": run_id, "spans": [s.span(e) for e in spans]}


@router.post(
    "/workflows/{slug:slug}/runs:batch",
    response={200: s.BatchOut},
    auth=allowed("start_run"),
    summary="Start many runs at once",
)
@refuses(404, 409)
def start_runs(request: HttpRequest, slug: SlugPath, body: i.StartBatchIn) -> Any:
    """Start 1 to 1,000 runs of the active version in one transaction. Each item has its own
    input, and optionally its own idempotency key and priority; the answer lists the runs in
    item order, each with `created` (false: its key answered the run started before, as the
    Idempotent-Replayed header of a single start says). Every item is checked before anything
    is written, and one bad item refuses the whole batch, nothing started: 422 with an entry
    per bad field, its path naming the item (`items[3].input.count`); a key used before with
    another input is a 409 naming each such item. More than 1,000 items is a 422 naming
    `items`; a body over the server's size limit, 413. A W3C `traceparent` header makes
    each new run's trace a part of the caller's."""
    workflow = versions.get_workflow_to_start(slug)
    items = [runs.StartItem(item.input, item.idempotency_key, item.priority) for item in body.items]
    started = tracecontext.start_runs(
        workflow, items, request.headers.get("traceparent"), api_key_id=key_of(request)
    )
    return s.batch(started)


def key_of(request: HttpRequest) -> int | None:
    """The API key a request came with (its runs count against the key's budgets), or None."""
    auth = getattr(request, "auth", None)
    return auth.pk if isinstance(auth, ApiKey) else None
