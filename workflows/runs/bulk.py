"""Runs in bulk: cancel, or replay the open dead letters of, runs chosen by id or by search.

As `deadletters.act_on_letters`: each run is handled in its own transaction through `runs`
(so one refusal spares the others, and each gets its own audit entry exactly as when it is
handled alone), a search selects at most `limit` runs, oldest first, and `dry_run` only
counts them. Replaying a run replays every open dead letter it has; a run with none is
refused, naming it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from workflows.core.states import RunStatus
from workflows.runs import actions as runs, letters as deadletters
from workflows.runs.letters import BulkResult
from workflows.runs.search import RunSearch
from workflows.store.errors import Conflict, DomainError, Invalid
from workflows.store.models import DeadLetter, Run

MAX_BULK = 1000
Action = Literal["cancel", "replay"]
ACTIONS: tuple[Action, ...] = ("cancel", "replay")
# What each action can apply to: a search for it matches only these runs.
APPLIES_TO: dict[str, tuple[str, ...]] = {
    "cancel": (RunStatus.RUNNING, RunStatus.WAITING),
    "replay": (RunStatus.FAILED, RunStatus.RUNNING),
}


def matching(action: Action, search: RunSearch) -> Any:
    """The runs a search selects for `action`, oldest first."""
    chosen = search.apply(Run.objects.filter(status__in=APPLIES_TO[action]))
    if action == "replay":
        open_letters = DeadLetter.objects.filter(status=DeadLetter.OPEN).values("run_id")
        chosen = chosen.filter(id__in=open_letters)
    return chosen.order_by("id")


COUNT_CAP = 10_000  # the list's buttons say "10000+" beyond: an exact count is the confirm page's


def count_matching(action: Action, search: RunSearch) -> int:
    """How many runs `matching` selects, counted up to COUNT_CAP + 1 (for the list's buttons)."""
    return int(matching(action, search).values("id")[: COUNT_CAP + 1].count())


def act_on_runs(
    action: Action,
    chosen: RunSearch | Sequence[int],
    actor: Any = None,
    reason: str = "",
    *,
    dry_run: bool = False,
    limit: int = MAX_BULK,
) -> BulkResult:
    """Cancel, or replay the open dead letters of, the runs named by id or up to `limit` runs
    a search matches; `dry_run` only counts them. A refused run spares the others."""
    if action not in ACTIONS:
        raise Invalid(f"action: {action!r} is not one of {', '.join(ACTIONS)}.")
    if not 1 <= limit <= MAX_BULK:
        raise Invalid(f"limit: give a number from 1 to {MAX_BULK}.")
    if isinstance(chosen, RunSearch):
        found = matching(action, chosen)
        ids, matched = list(found.values_list("id", flat=True)[:limit]), found.count()
    else:
        ids, matched = list(chosen), len(chosen)
    result = BulkResult(matched=matched, dry_run=dry_run, sample=ids[:100])
    if dry_run:
        return result
    for run_id in ids:
        try:
            act_on_run(action, run_id, actor, reason)
        except DomainError as exc:
            result.refused.append({"id": run_id, "reason": exc.message})
        else:
            result.done.append(run_id)
    return result


def act_on_run(action: Action, run_id: int, actor: Any, reason: str) -> None:
    if action == "cancel":
        runs.cancel_run(run_id, reason, actor)
        return
    letters = list(
        DeadLetter.objects.filter(run_id=run_id, status=DeadLetter.OPEN).values_list("id", flat=True)
    )
    if not letters:
        raise Conflict(f"Run {run_id} has no open dead letter: nothing to replay.")
    result = deadletters.act_on_letters("replay", letters, actor)
    if result.refused:
        raise Conflict(result.refused[0]["reason"])
