"""Dead letters in bulk: find open letters by filter, count them (dry run), replay or discard them.

`act_on_letters` is the one bulk action: the dashboard's page, the API and the admin all call
it, with the letters chosen by id or by filter. Each letter is replayed or discarded in its
own transaction through `runs`, so one refusal (its run was cancelled meanwhile, someone else
replayed it first) does not undo the others, and each letter gets its own audit entry,
exactly as when it is handled alone.

A filter selects at most `limit` letters (its size is not known to whoever sent it); a list
of ids is taken whole: the caller chose every letter in it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypedDict

from django.db.models import Count, Max, Min, QuerySet

from workflows.core.states import NODE_TERMINAL
from workflows.runs import actions as runs
from workflows.store.errors import DomainError, Invalid
from workflows.store.models import DeadLetter, NodeRun, RunEvent, Workflow

MAX_BULK = 1000
Action = Literal["replay", "discard"]
ACTIONS: tuple[Action, ...] = ("replay", "discard")


@dataclass(frozen=True)
class LetterFilter:
    """Which dead letters a bulk action applies to; None means "any"."""

    status: str | None = DeadLetter.OPEN
    workflow: str | None = None
    run: int | None = None
    node_id: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    signature: str | None = None
    error: str | None = None  # text the error contains, any case

    def apply(self, letters: QuerySet[DeadLetter]) -> QuerySet[DeadLetter]:
        lookups = {
            "status": self.status,
            "run__workflow__slug": self.workflow,
            "run_id": self.run,
            "node_id": self.node_id,
            "created_at__gt": self.created_after,
            "created_at__lt": self.created_before,
            "signature": self.signature,
            "error__icontains": self.error,
        }
        return letters.filter(**{k: v for k, v in lookups.items() if v is not None})


@dataclass
class BulkResult:
    matched: int
    dry_run: bool
    done: list[int] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)
    sample: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Group:
    """Letters of one workflow's node failing the same way: how many, first and last seen."""

    workflow: str
    node_id: str
    signature: str
    count: int
    first_seen: datetime
    last_seen: datetime
    latest: int  # the id of the newest letter, to show one


def groups(letter_filter: LetterFilter, limit: int = 100) -> list[Group]:
    """The letters a filter selects, grouped by (workflow, node, signature), biggest first."""
    rows = (
        letter_filter.apply(DeadLetter.objects.all())
        .values("run__workflow_id", "node_id", "signature")
        .annotate(
            count=Count("id"), first_seen=Min("created_at"), last_seen=Max("created_at"), latest=Max("id")
        )
        .order_by("-count", "-last_seen")[:limit]
    )
    slugs = dict(Workflow.objects.values_list("id", "slug"))  # not joined: a few rows, read once
    return [
        Group(
            slugs[r["run__workflow_id"]],
            r["node_id"],
            r["signature"],
            r["count"],
            r["first_seen"],
            r["last_seen"],
            r["latest"],
        )
        for r in rows
    ]


def matching(letter_filter: LetterFilter) -> QuerySet[DeadLetter]:
    return letter_filter.apply(DeadLetter.objects.filter(status=DeadLetter.OPEN)).order_by("id")


def replay_matching(letter_filter: LetterFilter, dry_run: bool, limit: int, actor: Any = None) -> BulkResult:
    """Replay up to `limit` open letters matching the filter, oldest first (or only count them)."""
    return act_on_letters("replay", letter_filter, actor, dry_run=dry_run, limit=limit)


def discard_matching(
    letter_filter: LetterFilter, reason: str, dry_run: bool, limit: int, actor: Any = None
) -> BulkResult:
    """Discard up to `limit` open letters matching the filter with one reason (or only count them)."""
    return act_on_letters("discard", letter_filter, actor, reason, dry_run=dry_run, limit=limit)


def act_on_letters(
    action: Action,
    letters: LetterFilter | Sequence[int],
    actor: Any = None,
    reason: str = "",
    *,
    dry_run: bool = False,
    limit: int = MAX_BULK,
) -> BulkResult:
    """Replay or discard the letters named by id, or up to `limit` open letters matching a
    filter, oldest first; `dry_run` only counts them. A refused letter spares the others."""
    if action == "discard" and not reason.strip():
        raise Invalid("reason: say why these dead letters are discarded.")
    if not 1 <= limit <= MAX_BULK:
        raise Invalid(f"limit: give a number from 1 to {MAX_BULK}.")
    ids, matched = select(letters, limit)
    result = BulkResult(matched=matched, dry_run=dry_run, sample=ids[:100])
    if dry_run:
        return result
    for letter_id in ids:
        try:
            act_on_letter(action, letter_id, actor, reason)
        except DomainError as exc:
            result.refused.append({"id": letter_id, "reason": exc.message})
        else:
            result.done.append(letter_id)
    return result


def select(letters: LetterFilter | Sequence[int], limit: int) -> tuple[list[int], int]:
    """Return the ids to act on and how many letters were chosen."""
    if isinstance(letters, LetterFilter):
        chosen = matching(letters)
        return list(chosen.values_list("id", flat=True)[:limit]), chosen.count()
    return list(letters), len(letters)


def act_on_letter(action: Action, letter_id: int, actor: Any, reason: str) -> None:
    if action == "replay":
        runs.replay_dead_letter(letter_id, actor)
    else:
        runs.discard_dead_letter(letter_id, reason, actor)


class AttemptRow(TypedDict):
    """One attempt of a node since its letter (a row of RunEvent.values())."""

    id: int
    attempt: int
    started_at: datetime | None
    at: datetime
    worker: str
    data: Any


@dataclass(frozen=True)
class ReplayOutcome:
    """What became of a replayed letter's node: its status now, the attempts since, a new letter."""

    node_status: str
    attempts: list[AttemptRow]
    new_letter: DeadLetter | None

    @property
    def is_settled(self) -> bool:
        return self.node_status in NODE_TERMINAL


def replay_outcome(letter: DeadLetter) -> ReplayOutcome:
    """Follow a letter's node after it was replayed (or re-run): attempts after the letter's."""
    node = NodeRun.objects.only("status").get(pk=letter.node_run_id)
    attempts = list(
        RunEvent.objects.filter(
            run_id=letter.run_id, node_id=letter.node_id, kind="node.attempt", attempt__gt=letter.attempt
        )
        .order_by("id")
        .values("id", "attempt", "started_at", "at", "worker", "data")
    )
    newer = DeadLetter.objects.filter(node_run_id=letter.node_run_id, id__gt=letter.pk).order_by("id").first()
    return ReplayOutcome(node.status, attempts, newer)


def is_unfixable_by_retry(letter: DeadLetter) -> bool:
    """Whether an open letter's last attempt said that no retry could fix it (it was not retried):
    its input or config must change, by a replay with edited input or a new version."""
    if letter.status != DeadLetter.OPEN:
        return False
    attempt = letter.map_item if letter.map_item_id else letter.node_run
    return attempt is not None and not attempt.retryable
