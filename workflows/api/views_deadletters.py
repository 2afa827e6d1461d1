"""Dead letters: list, read, replay, discard; replay or discard many by filter, dry run first."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse

from workflows import deadletters, runs
from workflows.api import serializers as s
from workflows.api.pagination import paginate
from workflows.api.routing import Call, render
from workflows.errors import NotFound
from workflows.models import DeadLetter, RunEvent


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


def list_letters(call: Call) -> HttpResponse:
    """List dead letters, newest first, filtered by status, workflow, run, node and time."""
    letters = DeadLetter.objects.select_related("run__workflow", "resolved_by")
    letters = letter_filter(call.query, call.query.status).apply(letters)
    return render(paginate(letters, call.query, "id", s.letter_summary))


def read_letter(call: Call, letter_id: int) -> HttpResponse:
    """Read a dead letter: input snapshot (run input, upstream outputs, config), error,
    traceback and every attempt of its node."""
    letter = get_letter(letter_id)
    attempts = RunEvent.objects.filter(run_id=letter.run_id, node_id=letter.node_id, kind="node.attempt")
    return render(s.letter(letter, list(attempts.order_by("id"))))


def replay_letter(call: Call, letter_id: int) -> HttpResponse:
    """Replay the dead node within its run, optionally with edited input; completed nodes keep their outputs."""
    run = runs.replay_dead_letter(letter_id, user=call.key, edited_input=call.body.input)
    return render(s.run_summary(runs.get_run(run.pk)))


def discard_letter(call: Call, letter_id: int) -> HttpResponse:
    """Close a dead letter without replaying it; the reason is kept."""
    runs.discard_dead_letter(letter_id, call.body.reason, user=call.key)
    return render(s.letter_summary(get_letter(letter_id)))


def replay_many(call: Call) -> HttpResponse:
    """Replay the open dead letters matching a filter, oldest first; `dry_run` only counts them."""
    b = call.body
    result = deadletters.replay_matching(letter_filter(b.filter), b.dry_run, b.limit, actor=call.key)
    return render(s.bulk(result))


def discard_many(call: Call) -> HttpResponse:
    """Discard the open dead letters matching a filter with one reason; `dry_run` only counts them."""
    b = call.body
    result = deadletters.discard_matching(
        letter_filter(b.filter), b.reason, b.dry_run, b.limit, actor=call.key
    )
    return render(s.bulk(result))
