"""Dead letters in bulk: find open letters by filter, count them (dry run), replay or discard them.

Each letter is replayed or discarded in its own transaction through `runs`, so one refusal
(its run was cancelled meanwhile, someone else replayed it first) does not undo the others,
and each letter gets its own audit entry, exactly as when it is handled alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from workflows import runs
from workflows.errors import DomainError, Invalid
from workflows.models import DeadLetter

MAX_BULK = 1000


@dataclass(frozen=True)
class LetterFilter:
    """Which dead letters a bulk action applies to; None means "any"."""

    status: str | None = DeadLetter.OPEN
    workflow: str | None = None
    run: int | None = None
    node_id: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None

    def apply(self, letters: QuerySet[DeadLetter]) -> QuerySet[DeadLetter]:
        lookups = {
            "status": self.status,
            "run__workflow__slug": self.workflow,
            "run_id": self.run,
            "node_id": self.node_id,
            "created_at__gt": self.created_after,
            "created_at__lt": self.created_before,
        }
        return letters.filter(**{k: v for k, v in lookups.items() if v is not None})


@dataclass
class BulkResult:
    matched: int
    dry_run: bool
    done: list[int] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)
    sample: list[int] = field(default_factory=list)


def matching(letter_filter: LetterFilter) -> QuerySet[DeadLetter]:
    return letter_filter.apply(DeadLetter.objects.filter(status=DeadLetter.OPEN)).order_by("id")


def replay_matching(letter_filter: LetterFilter, dry_run: bool, limit: int, actor: Any = None) -> BulkResult:
    """Replay up to `limit` open letters matching the filter, oldest first (or only count them)."""
    return bulk(letter_filter, dry_run, limit, lambda letter_id: runs.replay_dead_letter(letter_id, actor))


def discard_matching(
    letter_filter: LetterFilter, reason: str, dry_run: bool, limit: int, actor: Any = None
) -> BulkResult:
    """Discard up to `limit` open letters matching the filter with one reason (or only count them)."""
    if not reason.strip():
        raise Invalid("reason: say why these dead letters are discarded.")
    return bulk(
        letter_filter, dry_run, limit, lambda letter_id: runs.discard_dead_letter(letter_id, reason, actor)
    )


def bulk(letter_filter: LetterFilter, dry_run: bool, limit: int, action: Any) -> BulkResult:
    if not 1 <= limit <= MAX_BULK:
        raise Invalid(f"limit: give a number from 1 to {MAX_BULK}.")
    letters = matching(letter_filter)
    ids = list(letters.values_list("id", flat=True)[:limit])
    result = BulkResult(matched=letters.count(), dry_run=dry_run, sample=ids[:100])
    if dry_run:
        return result
    for letter_id in ids:
        try:
            action(letter_id)
        except DomainError as exc:
            result.refused.append({"id": letter_id, "reason": exc.message})
        else:
            result.done.append(letter_id)
    return result
