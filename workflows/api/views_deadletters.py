"""Dead letters: list, read, replay, discard; replay or discard many by filter, dry run first."""

from __future__ import annotations

from typing import Annotated, Any

from django.http import HttpRequest
from ninja import Path, Query, Router

from workflows.api import inputs as i, serializers as s
from workflows.api.auth import ApiRequest, allowed
from workflows.api.pagination import paginate
from workflows.api.parsing import MAX_ID
from workflows.api.schema import refuses
from workflows.runs import actions as runs, letters as deadletters
from workflows.store.errors import NotFound
from workflows.store.models import DeadLetter, RunEvent

router = Router(tags=["dead letters"])
LetterId = Annotated[int, Path(ge=1, le=MAX_ID)]


def get_letter(letter_id: int) -> DeadLetter:
    try:
        return DeadLetter.objects.select_related("run__workflow", "resolved_by").get(pk=letter_id)
    except DeadLetter.DoesNotExist:
        raise NotFound(f"No dead letter with id {letter_id}.") from None


def letter_filter(f: Any, status: str | None = DeadLetter.OPEN) -> deadletters.LetterFilter:
    return deadletters.LetterFilter(
        status=status,
        workflow=f.workflow,
        run=f.run,
        node_id=f.node_id,
        created_after=f.created_after,
        created_before=f.created_before,
    )


@router.get("/deadletters", response=s.DeadLetterPage, auth=allowed("view"), summary="List dead letters")
def list_letters(request: HttpRequest, q: Query[i.LetterQuery]) -> Any:
    """List dead letters, newest first, filtered by status, workflow, run, node and time."""
    letters = DeadLetter.objects.select_related("run__workflow", "resolved_by")
    letters = letter_filter(q, q.status).apply(letters)
    return paginate(letters, q, "id", s.letter_summary)


@router.post(
    "/deadletters/replay", response=s.BulkOut, auth=allowed("replay"), summary="Replay dead letters by filter"
)
def replay_many(request: ApiRequest, body: i.BulkReplayIn) -> Any:
    """Replay the open dead letters matching a filter, oldest first; `dry_run` only counts them."""
    result = deadletters.replay_matching(
        letter_filter(body.filter), body.dry_run, body.limit, actor=request.auth
    )
    return s.bulk(result)


@router.post(
    "/deadletters/discard",
    response=s.BulkOut,
    auth=allowed("discard"),
    summary="Discard dead letters by filter",
)
def discard_many(request: ApiRequest, body: i.BulkDiscardIn) -> Any:
    """Discard the open dead letters matching a filter with one reason; `dry_run` only counts them."""
    result = deadletters.discard_matching(
        letter_filter(body.filter), body.reason, body.dry_run, body.limit, actor=request.auth
    )
    return s.bulk(result)


@router.get(
    "/deadletters/{id:letter_id}",
    response=s.DeadLetterOut,
    auth=allowed("view"),
    summary="Read a dead letter",
)
@refuses(404)
def read_letter(request: HttpRequest, letter_id: LetterId) -> Any:
    """Read a dead letter: input snapshot (run input, upstream outputs, config), error,
    traceback and every attempt of its node."""
    letter = get_letter(letter_id)
    attempts = RunEvent.objects.filter(run_id=letter.run_id, node_id=letter.node_id, kind="node.attempt")
    return s.letter(letter, list(attempts.order_by("id")))


@router.post(
    "/deadletters/{id:letter_id}/replay",
    response=s.RunSummary,
    auth=allowed("replay"),
    summary="Replay a dead letter",
)
@refuses(404, 409)
def replay_letter(request: ApiRequest, letter_id: LetterId, body: i.ReplayIn = i.EMPTY_REPLAY) -> Any:
    """Replay the dead node within its run, optionally with edited input; completed nodes keep their outputs."""
    run = runs.replay_dead_letter(letter_id, user=request.auth, edited_input=body.input)
    return s.run_summary(runs.get_run(run.pk))


@router.post(
    "/deadletters/{id:letter_id}/discard",
    response=s.DeadLetterSummary,
    auth=allowed("discard"),
    summary="Discard a dead letter",
)
@refuses(404, 409)
def discard_letter(request: ApiRequest, letter_id: LetterId, body: i.DiscardIn) -> Any:
    """Close a dead letter without replaying it; the reason is kept."""
    runs.discard_dead_letter(letter_id, body.reason, user=request.auth)
    return s.letter_summary(get_letter(letter_id))
