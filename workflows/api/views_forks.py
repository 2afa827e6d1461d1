"""Forks of runs: start one from a node of a run (on its version, another, or a draft); compare two runs."""

from __future__ import annotations

from typing import Annotated, Any

from django.http import HttpResponse
from ninja import Header, Path, Router, Status

from workflows.api import inputs as i, serializers as s, serializers_forks as f
from workflows.api.auth import ApiRequest, allowed, authorize_actor
from workflows.api.parsing import MAX_ID
from workflows.api.schema import refuses
from workflows.api.views_runs import read_run
from workflows.forks import comparison, forking
from workflows.runs import actions as runs

router = Router(tags=["runs"])
RunId = Annotated[int, Path(ge=1, le=MAX_ID)]
NodeId = Annotated[str, Path(min_length=1, max_length=64)]


@router.post(
    "/runs/{id:run_id}/forks",
    response={201: s.RunOut, 200: s.RunOut},
    auth=allowed("fork_run"),
    summary="Fork a run at a node",
)
@refuses(404, 409)
def fork_run(
    request: ApiRequest,
    response: HttpResponse,
    run_id: RunId,
    body: i.ForkIn,
    idempotency_key: Annotated[i.IdempotencyKey | None, Header(alias="Idempotency-Key")] = None,
) -> Any:
    """Start a new run from a node of this run (finished, failed or running), on its version, another
    published version or a draft (frozen first, as for a test run: that also needs the editor role, the
    `edit` scope for a key). The nodes that are not the fork point and not below it are carried over
    (status and output copied, never executed again) when the run finished them as succeeded or skipped
    and the version defines them alike; the fork point and every node below it run, the fork point with
    the edited `input` if given. With `calls` other than `live`, the fork answers its LLM and agent tool
    calls from this run's recorded calls (matched by a canonical hash of the request, shown on each call). The fork point's upstream nodes must all be carried over: a version that
    lacks the fork point, or defines an upstream node differently, or an upstream node not finished in this
    run, is a 422 naming each such node. The answer is the new run with every node, as GET /runs/{id}:
    its `forked_from` names this run, whose `forks` list it. With Idempotency-Key (a run's key in
    the workflow, as for a start), the same fork asked again answers the fork made the first
    time (200) and another request with the key is refused (409)."""
    if forking.is_onto_draft(run_id, body.version):
        authorize_actor(request, "publish")
    args = (run_id, body.node_id, body.version, body.input)
    if idempotency_key:
        fork, created = forking.fork_once(idempotency_key, *args, user=request.auth, calls=body.calls)
    else:
        fork, created = forking.fork_run(*args, user=request.auth, calls=body.calls), True
    response["Location"] = s.run_summary(fork)["url"]
    if not created:
        response["Idempotent-Replayed"] = "true"
    return Status(201 if created else 200, read_run(fork.pk))


@router.get(
    "/runs/{id:run_id}/comparison/{other_id}",
    response=f.ComparisonOut,
    auth=allowed("view"),
    summary="Compare two runs of a workflow",
)
@refuses(404)
def compare_runs(request: ApiRequest, run_id: RunId, other_id: RunId) -> Any:
    """Put this run (left, before) and another run of the same workflow (right, after) side by side:
    per node, status, attempts, output (a JSON diff: each differing leaf at its JSON path; for LLM
    text, a word diff too), LLM tokens and cost, duration, and whether it was carried over by a fork;
    the runs' final outputs and totals (duration, attempts executed, LLM calls, tokens, cost). Runs of
    two workflows are a 422 naming `other_id`."""
    return f.comparison(comparison.compare_runs(run_id, other_id))


@router.get(
    "/runs/{id:run_id}/nodes/{node_id}/calls",
    response=list[f.RecordedCallOut],
    auth=allowed("view"),
    summary="List a node's recorded calls",
)
@refuses(404)
def list_calls(request: ApiRequest, run_id: RunId, node_id: NodeId) -> Any:
    """The LLM calls and agent tool calls a node made, oldest first (at most 200): each with the canonical
    hash of its request, and how it was answered: `live`, `replayed` (from the run a fork replays; it
    cost nothing) or `missing` (a fork in recorded mode asked for a call its origin never made). Compare
    hashes to see why a call was not replayed."""
    runs.get_run(run_id)
    return [f.recorded_call(r) for r in forking.calls_of(run_id, node_id)]
