"""Filters of the runs and dead-letter lists, parsed from the query string (or a form)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db.models import QuerySet
from django.http import QueryDict
from django.utils import timezone

from workflows import approvals
from workflows.core import priorities
from workflows.core.states import RunStatus
from workflows.models import DeadLetter, Run

SINCE = {
    "15m": timedelta(minutes=15),
    "1h": timedelta(hours=1),
    "24h": timedelta(days=1),
    "7d": timedelta(days=7),
}
LETTER_STATUSES = (DeadLetter.OPEN, DeadLetter.REPLAYED, DeadLetter.DISCARDED)


def positive_int(raw: str | None) -> int | None:
    return int(raw) if raw and raw.isdigit() and 0 < int(raw) < 2**63 else None


@dataclass(frozen=True)
class RunFilter:
    status: str = ""
    workflow: str = ""
    version: int | None = None
    since: str = ""
    priority: int | None = None  # runs of at least this priority
    before: int | None = None  # keyset paging: runs with a smaller id

    @classmethod
    def parse(cls, query: QueryDict) -> RunFilter:
        status = query.get("status", "")
        since = query.get("since", "")
        return cls(
            status=status if status in tuple(RunStatus) else "",
            workflow=query.get("workflow", "")[:100],
            version=positive_int(query.get("version")),
            since=since if since in SINCE else "",
            priority=priority_of(query.get("priority")),
            before=positive_int(query.get("before")),
        )

    def apply(self, runs: QuerySet[Run]) -> QuerySet[Run]:
        lookups: dict[str, Any] = {
            "status": self.status or None,
            "workflow__slug": self.workflow or None,
            "version__number": self.version,
            "created_at__gte": timezone.now() - SINCE[self.since] if self.since else None,
            "id__lt": self.before,
            "priority__gte": self.priority,
        }
        return runs.filter(**{k: v for k, v in lookups.items() if v is not None})

    def query(self, **changes: Any) -> str:
        values = {
            "status": self.status,
            "workflow": self.workflow,
            "version": self.version,
            "since": self.since,
            "priority": self.priority,
        }
        values.update(changes)
        q = QueryDict(mutable=True)
        q.update({k: v for k, v in values.items() if v not in (None, "")})
        return q.urlencode()


@dataclass(frozen=True)
class LetterFilter:
    status: str = DeadLetter.OPEN
    workflow: str = ""
    node: str = ""
    run: int | None = None
    before: int | None = None

    @classmethod
    def parse(cls, query: QueryDict) -> LetterFilter:
        status = query.get("status", DeadLetter.OPEN)
        return cls(
            status=status if status in LETTER_STATUSES or status == "any" else DeadLetter.OPEN,
            workflow=query.get("workflow", "")[:100],
            node=query.get("node", "")[:64],
            run=positive_int(query.get("run")),
            before=positive_int(query.get("before")),
        )

    def apply(self, letters: QuerySet[DeadLetter]) -> QuerySet[DeadLetter]:
        lookups: dict[str, Any] = {
            "status": None if self.status == "any" else self.status,
            "run__workflow__slug": self.workflow or None,
            "node_id": self.node or None,
            "run_id": self.run,
            "id__lt": self.before,
        }
        return letters.filter(**{k: v for k, v in lookups.items() if v is not None})

    def query(self, **changes: Any) -> str:
        values = {"status": self.status, "workflow": self.workflow, "node": self.node, "run": self.run}
        values.update(changes)
        q = QueryDict(mutable=True)
        q.update({k: v for k, v in values.items() if v not in (None, "")})
        return q.urlencode()

    @property
    def is_open_only(self) -> bool:
        return self.status == DeadLetter.OPEN


AGES = {"15m": 15 * 60, "1h": 3600, "4h": 4 * 3600, "24h": 86400}


@dataclass(frozen=True)
class InboxFilter:
    """The inbox's filters: workflow slug, node id, waiting longer than, a named assignee."""

    workflow: str = ""
    node: str = ""
    age: str = ""
    assignee: str = ""

    @classmethod
    def parse(cls, query: QueryDict) -> InboxFilter:
        age = query.get("age", "")
        return cls(
            workflow=query.get("workflow", "").strip()[:100],
            node=query.get("node", "").strip()[:64],
            age=age if age in AGES else "",
            assignee=query.get("assignee", "").strip()[:150],
        )

    def for_domain(self) -> approvals.InboxFilters:
        return approvals.InboxFilters(
            workflow=self.workflow,
            node=self.node,
            older_than_seconds=AGES[self.age] if self.age else None,
            assignee=self.assignee,
        )

    def query(self) -> str:
        q = QueryDict(mutable=True)
        q.update({k: v for k, v in vars(self).items() if v})
        return q.urlencode()

    @property
    def is_set(self) -> bool:
        return any(vars(self).values())


def priority_of(value: str | None) -> int | None:
    """A priority filter from the query string (ignored when it is not one)."""
    try:
        number = int(value or "")
    except ValueError:
        return None
    return number if priorities.check_priority(number) is None else None
