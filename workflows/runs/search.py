"""Finding runs: by status, workflow, version, time, input values, error text and failing node.

The status searched is the one shown (runs/waiting.py): `waiting` finds the running runs
that wait on a person, an event, a timer or a child run, and `running` leaves them out.

One search for the runs page, its bulk actions and the API's run list. Input values are
matched by JSONB containment (`input @> '{"customer": {"tier": "gold"}}'`), which the GIN
index `run_input_gin_idx` (jsonb_path_ops) answers; the error and the failing node are
those of the run's dead letters (a node that died filed one), so they are searched there.
Pages are keyset pages over the id, both ways: `before` gives older runs, `after` newer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from workflows.runs.waiting import with_shown_status
from workflows.store.errors import Invalid
from workflows.store.models import DeadLetter, Run

MAX_TERMS = 10


@dataclass(frozen=True)
class RunSearch:
    """Which runs to find; empty or None means "any"."""

    status: str = ""
    workflow: str = ""
    version: int | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    input: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    node: str = ""
    priority: int | None = None  # at least this priority (core/priorities.py)
    # Runs started from the editor's Test run are left out unless asked for, or unless a
    # version is named (a test version's runs are all test runs).
    include_tests: bool = False

    def apply(self, runs: QuerySet[Run]) -> QuerySet[Run]:
        lookups: dict[str, Any] = {
            "workflow__slug": self.workflow or None,
            "version__number": self.version,
            "created_at__gte": self.created_after,
            "created_at__lt": self.created_before,
            "input__contains": self.input or None,
            "priority__gte": self.priority,
        }
        runs = runs.filter(**{k: v for k, v in lookups.items() if v is not None})
        if not self.include_tests and self.version is None:
            runs = runs.filter(is_test=False)
        if self.status:  # as shown: `waiting` takes in running runs that wait (runs/waiting.py)
            runs = with_shown_status(runs, self.status)
        if self.error or self.node:
            # IN, not EXISTS: PostgreSQL hashes the matching letters once and probes it per run
            # (a semi-join); EXISTS became an index probe per run, 287 ms when the newest
            # 20,000 runs had no matching letter (bench/pages_bench.py), against 30 ms.
            runs = runs.filter(id__in=self.letters().values("run_id"))
        return runs

    def letters(self) -> QuerySet[DeadLetter]:
        letters = DeadLetter.objects.all()
        if self.node:
            letters = letters.filter(node_id=self.node)
        if self.error:
            letters = letters.filter(error__icontains=self.error)
        return letters


def parse_input_terms(text: str) -> dict[str, Any]:
    """Turn `customer=acme input.order.total=12` into `{"customer": "acme", "order": {"total": 12}}`.

    Terms are separated by spaces or commas; a path is dotted, `input.` in front is optional;
    a value is read as JSON when it is JSON (numbers, true, false, null, "quoted text"),
    as text otherwise. A bad term is refused naming it.
    """
    found: dict[str, Any] = {}
    terms = [t for t in text.replace(",", " ").split() if t]
    if len(terms) > MAX_TERMS:
        raise Invalid(f"input: at most {MAX_TERMS} terms, {len(terms)} given.")
    for term in terms:
        path, sep, raw = term.partition("=")
        keys = path.removeprefix("input.").split(".")
        if not sep or not all(keys) or path == "input":
            raise Invalid(f"input: {term!r} is not a search term; write field=value, e.g. customer=acme.")
        merge(found, keys, json_or_text(raw))
    return found


def json_or_text(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def merge(into: dict[str, Any], keys: list[str], value: Any) -> None:
    for key in keys[:-1]:
        nested = into.setdefault(key, {})
        if not isinstance(nested, dict):
            raise Invalid(f"input: {'.'.join(keys)} is given a value and a field at once.")
        into = nested
    into[keys[-1]] = value


@dataclass(frozen=True)
class RunPage:
    runs: list[Run]
    newer: int | None  # the id to page from for newer runs (`after`), if any
    older: int | None  # the id to page from for older runs (`before`), if any


def page(runs: QuerySet[Run], size: int, before: int | None = None, after: int | None = None) -> RunPage:
    """A keyset page of runs, newest first: older than `before`, or the oldest newer than `after`."""
    if after is not None:
        rows = list(runs.filter(id__gt=after).order_by("id")[: size + 1])
        more_newer = len(rows) > size
        rows = rows[:size][::-1]
        return RunPage(rows, rows[0].pk if rows and more_newer else None, rows[-1].pk if rows else None)
    if before is not None:
        runs = runs.filter(id__lt=before)
    rows = list(runs.order_by("-id")[: size + 1])
    more_older = len(rows) > size
    rows = rows[:size]
    return RunPage(
        rows,
        rows[0].pk if rows and before is not None else None,
        rows[-1].pk if rows and more_older else None,
    )


def failures(run_ids: list[int]) -> dict[int, DeadLetter]:
    """The latest dead letter of each of these runs: its failing node and error."""
    latest: dict[int, DeadLetter] = {}
    for letter in (
        DeadLetter.objects.filter(run_id__in=run_ids)
        .order_by("id")
        .only("id", "run_id", "node_id", "error", "status")
    ):
        latest[letter.run_id] = letter
    return latest
