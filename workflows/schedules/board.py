"""Every schedule of every workflow, for the global schedules page: next fire, last run,
whether it fires; searched by schedule name or workflow slug or title.

Decided: one row per schedule, ordered by when it fires next (paused ones last), at most
BOARD_LIMIT rows (the page says when more matched); the last run is read per row (an indexed
lookup by workflow and idempotency-key prefix): at the limit 200 small queries, simpler
than a join on a key's parsed prefix. Not measured yet at that size; a page of a few dozen
schedules is the expected case.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from django.db.models import F, Q

from workflows.schedules.timetable import recent_runs
from workflows.store.models import Run, Schedule

BOARD_LIMIT = 200
NEVER = datetime.max.replace(tzinfo=UTC)


@dataclass(frozen=True)
class BoardRow:
    """One schedule on the global page."""

    schedule: Schedule
    fires: bool  # enabled and its workflow not paused
    next_fire_at: datetime | None
    last_run: Run | None


def board(search: str = "", limit: int = BOARD_LIMIT) -> tuple[list[BoardRow], bool]:
    """The schedules matching `search`, with whether more matched than `limit`."""
    found = Schedule.objects.select_related("workflow")
    if search.strip():
        words = search.strip()
        found = found.filter(
            Q(name__icontains=words)
            | Q(workflow__slug__icontains=words)
            | Q(workflow__title__icontains=words)
        )
    ordered = found.order_by(F("next_fire_at").asc(nulls_last=True), "workflow__slug", "name")
    schedules = list(ordered[: limit + 1])
    rows = [row_of(s) for s in schedules[:limit]]
    rows.sort(
        key=lambda r: (not r.fires, r.next_fire_at is None, r.next_fire_at or datetime.max.astimezone())
    )
    return rows, len(schedules) > limit


def row_of(schedule: Schedule) -> BoardRow:
    fires = schedule.enabled and not schedule.workflow.paused
    last = recent_runs(schedule, 1)
    return BoardRow(schedule, fires, schedule.next_fire_at if fires else None, last[0] if last else None)
