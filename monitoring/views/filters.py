"""Filters of the runs and dead-letter lists, parsed from the query string (or a form)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import QuerySet
from django.http import QueryDict
from django.utils import timezone

from workflows.core import priorities
from workflows.core.states import RunStatus
from workflows.runs import letters as deadletters, search as runsearch
from workflows.store.models import DeadLetter
from workflows.waits import approvals

SINCE = {
    "15m": timedelta(minutes=15),
    "1h": timedelta(hours=1),
    "24h": timedelta(days=1),
    "7d": timedelta(days=7),
}
LETTER_STATUSES = (DeadLetter.OPEN, DeadLetter.REPLAYED, DeadLetter.DISCARDED, DeadLetter.COMPENSATED)


def positive_int(raw: str | None) -> int | None:
    return int(raw) if raw and raw.isdigit() and 0 < int(raw) < 2**63 else None


def moment(raw: str | None) -> datetime | None:
    """A `datetime-local` field's value (the server's time zone), or None if blank or bad."""
    if not raw:
        return None
    try:
        value = datetime.fromisoformat(raw[:32])
    except ValueError:
        return None
    return timezone.make_aware(value) if timezone.is_naive(value) else value


def local_text(value: datetime | None) -> str:
    return timezone.localtime(value).strftime("%Y-%m-%dT%H:%M") if value else ""


@dataclass(frozen=True)
class RunFilter:
    """The runs page's filters; `input`, `error` and `node` are searched (runsearch)."""

    status: str = ""
    workflow: str = ""
    version: int | None = None
    since: str = ""
    priority: int | None = None  # runs of at least this priority
    start: datetime | None = None  # created at or after
    end: datetime | None = None  # created before
    input: str = ""
    error: str = ""
    node: str = ""
    before: int | None = None  # keyset paging: runs with a smaller id
    after: int | None = None  # keyset paging: runs with a larger id
    tests: bool = False  # also the editor's test runs (left out by default)

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
            start=moment(query.get("from")),
            end=moment(query.get("to")),
            input=query.get("input", "").strip()[:500],
            error=query.get("error", "").strip()[:200],
            node=query.get("node", "").strip()[:64],
            before=positive_int(query.get("before")),
            after=positive_int(query.get("after")),
            tests=query.get("tests") == "1",
        )

    def search(self) -> runsearch.RunSearch:
        """The domain's search; an input term that does not parse is refused (Invalid)."""
        start = timezone.now() - SINCE[self.since] if self.since else self.start
        return runsearch.RunSearch(
            status=self.status,
            workflow=self.workflow,
            version=self.version,
            created_after=start,
            created_before=self.end,
            input=runsearch.parse_input_terms(self.input),
            error=self.error,
            node=self.node,
            priority=self.priority,
            include_tests=self.tests,
        )

    def query(self, **changes: Any) -> str:
        values: dict[str, Any] = {
            "status": self.status,
            "workflow": self.workflow,
            "version": self.version,
            "since": self.since,
            "priority": self.priority,
            "from": local_text(self.start),
            "to": local_text(self.end),
            "input": self.input,
            "error": self.error,
            "node": self.node,
            "tests": "1" if self.tests else "",
        }
        values.update(changes)
        q = QueryDict(mutable=True)
        q.update({k: v for k, v in values.items() if v not in (None, "")})
        return q.urlencode()

    @property
    def is_set(self) -> bool:
        return bool(self.query())


@dataclass(frozen=True)
class LetterFilter:
    """The dead-letter pages' filters; `view` is the grouped view or the flat list."""

    status: str = DeadLetter.OPEN
    workflow: str = ""
    node: str = ""
    run: int | None = None
    signature: str = ""
    error: str = ""
    since: str = ""
    start: datetime | None = None
    end: datetime | None = None
    view: str = "groups"
    before: int | None = None

    @classmethod
    def parse(cls, query: QueryDict) -> LetterFilter:
        status = query.get("status", DeadLetter.OPEN)
        since = query.get("since", "")
        signature = query.get("signature", "")[:200]
        node = query.get("node", "")[:64]
        run = positive_int(query.get("run"))
        # A group's letters, or a run's, are a list; otherwise the groups come first.
        default_view = "list" if signature or run else "groups"
        view = query.get("view", default_view)
        return cls(
            status=status if status in LETTER_STATUSES or status == "any" else DeadLetter.OPEN,
            workflow=query.get("workflow", "")[:100],
            node=node,
            run=run,
            signature=signature,
            error=query.get("error", "").strip()[:200],
            since=since if since in SINCE else "",
            start=moment(query.get("from")),
            end=moment(query.get("to")),
            view=view if view in ("groups", "list") else default_view,
            before=positive_int(query.get("before")),
        )

    def for_domain(self) -> deadletters.LetterFilter:
        """The letters this filter shows, on every page of the list."""
        start = timezone.now() - SINCE[self.since] if self.since else self.start
        return deadletters.LetterFilter(
            status=None if self.status == "any" else self.status,
            workflow=self.workflow or None,
            run=self.run,
            node_id=self.node or None,
            created_after=start,
            created_before=self.end,
            signature=self.signature or None,
            error=self.error or None,
        )

    def apply(self, letters: QuerySet[DeadLetter]) -> QuerySet[DeadLetter]:
        letters = self.for_domain().apply(letters)
        return letters.filter(id__lt=self.before) if self.before else letters

    def query(self, **changes: Any) -> str:
        values: dict[str, Any] = {
            "status": self.status,
            "workflow": self.workflow,
            "node": self.node,
            "run": self.run,
            "signature": self.signature,
            "error": self.error,
            "since": self.since,
            "from": local_text(self.start),
            "to": local_text(self.end),
            "view": self.view,
        }
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
