"""Operators' additions: a node attempt with its log, re-run from a node, dead-letter groups."""

from __future__ import annotations

from typing import Annotated, Any

from django.http import HttpRequest
from ninja import Path, Query, Router

from workflows.api import inputs as i, serializers as s
from workflows.api.auth import ApiRequest, allowed
from workflows.api.parsing import MAX_ID
from workflows.api.schema import refuses
from workflows.runs import actions as runs, letters as deadletters, rerun as reruns
from workflows.store.errors import NotFound
from workflows.store.models import RunEvent

router = Router(tags=["runs"])
RunId = Annotated[int, Path(ge=1, le=MAX_ID)]
NodeId = Annotated[str, Path(min_length=1, max_length=64)]
AttemptNo = Annotated[int, Path(ge=1, le=2**31 - 1)]


@router.get(
    "/runs/{id:run_id}/nodes/{node_id}/attempts",
    response=list[s.AttemptOut],
    auth=allowed("view"),
    summary="List a node's attempts with their logs",
)
@refuses(404)
def list_attempts(request: HttpRequest, run_id: RunId, node_id: NodeId) -> Any:
    """Every finished attempt of a node of a run, oldest first, with what its handler logged."""
    runs.get_run(run_id)
    events = RunEvent.objects.filter(run_id=run_id, node_id=node_id, kind="node.attempt").order_by("id")
    return [s.attempt(e) for e in events]


@router.get(
    "/runs/{id:run_id}/nodes/{node_id}/attempts/{attempt}",
    response=s.AttemptOut,
    auth=allowed("view"),
    summary="Read a node attempt with its log",
)
@refuses(404)
def get_attempt(request: HttpRequest, run_id: RunId, node_id: NodeId, attempt: AttemptNo) -> Any:
    """One attempt: outcome, timings, worker, error and the log its handler wrote (logging and
    print, at most 64 KiB; a marker says what was cut)."""
    runs.get_run(run_id)
    event = (
        RunEvent.objects.filter(run_id=run_id, node_id=node_id, kind="node.attempt", attempt=attempt)
        .order_by("-id")
        .first()
    )
    if event is None:
        raise NotFound(f"Run {run_id} has no finished attempt {attempt} of node {node_id!r}.")
    return s.attempt(event)


@router.post(
    "/runs/{id:run_id}/rerun", response=s.RerunOut, auth=allowed("rerun_node"), summary="Re-run from a node"
)
@refuses(404, 409)
def rerun(request: ApiRequest, run_id: RunId, body: i.RerunIn) -> Any:
    """Re-run a finished run from a node: that node and every node downstream of it run again
    in the same run; the nodes above keep their outputs. Audited."""
    nodes = reruns.rerun_from_node(run_id, body.node_id, request.auth)
    return {"run": s.run_summary(runs.get_run(run_id)), "nodes": nodes}


@router.get(
    "/deadletters/groups",
    response=list[s.LetterGroupOut],
    auth=allowed("view"),
    summary="Dead letters grouped by workflow, node and error signature",
)
def letter_groups(request: HttpRequest, q: Query[i.GroupQuery]) -> Any:
    """Dead letters grouped by (workflow, node, error signature: the error with numbers and ids
    taken out), with counts and first and last seen; the 100 biggest groups."""
    flt = deadletters.LetterFilter(
        status=q.status,
        workflow=q.workflow,
        node_id=q.node_id,
        error=q.error,
        created_after=q.created_after,
        created_before=q.created_before,
    )
    return [vars(g) for g in deadletters.groups(flt)]
