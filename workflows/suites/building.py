"""Suites and their cases: by hand, from the last N runs (filtered as the runs page filters),
from picked runs, or from a JSONL upload.

Decisions:

- A case built from a run takes the run's input, the run as its origin (its recorded calls
  replay), and one expectation: the final output equals the run's. A run that did not
  succeed is refused when picked, and left out of "the last N" (the default status filter is
  succeeded). Runs that are themselves suite cases are never taken.
- A case's name is unique in nothing; built from a run it is `run <id>`.
- Every write is one transaction: an upload with a bad line, or a pick with a bad run, leaves
  nothing behind. Errors name the line (from 1) or the run, and the field.
- Expectations are checked when written (core/expectations.py): a JSON path that does not
  parse is refused then, not when the suite runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction

from workflows.core import expectations
from workflows.core.states import RunStatus
from workflows.runs import actions as runs
from workflows.runs.search import RunSearch
from workflows.store import audit
from workflows.store.errors import Conflict, Invalid, NotFound
from workflows.store.models import Run, Workflow
from workflows.store.suites import Suite, SuiteCase

MAX_CASES = 500
MAX_FROM_RUNS = 200
MAX_UPLOAD_CHARS = 2_000_000


@dataclass(frozen=True)
class CaseIn:
    """A case to write: its input, the run it came from (its id), its expectations (JSON)."""

    input: dict[str, Any]
    name: str = ""
    origin: int | None = None
    expectations: list[Any] = field(default_factory=list)


def get_suite(workflow: Workflow, name: str) -> Suite:
    try:
        return Suite.objects.select_related("workflow").get(workflow=workflow, name=name)
    except Suite.DoesNotExist:
        raise NotFound(f"Workflow {workflow.slug!r} has no suite {name!r}.") from None


def get_suite_by_id(suite_id: int) -> Suite:
    try:
        return Suite.objects.select_related("workflow").get(pk=suite_id)
    except Suite.DoesNotExist:
        raise NotFound(f"There is no suite {suite_id}.") from None


def create_suite(
    workflow: Workflow,
    name: str,
    description: str = "",
    required_to_publish: bool = False,
    cases: Iterable[CaseIn] = (),
    user: Any = None,
) -> Suite:
    """Create a suite with its cases, in one transaction; a taken name is a 409."""
    name = name.strip()
    if not name or len(name) > 100:
        raise Invalid("name: a suite needs a name of 1 to 100 characters.")
    with transaction.atomic():
        try:
            with transaction.atomic():
                suite = Suite.objects.create(
                    workflow=workflow,
                    name=name,
                    description=description[:500],
                    required_to_publish=required_to_publish,
                    created_by=person(user),
                )
        except IntegrityError:
            raise Conflict(f"name: workflow {workflow.slug!r} already has a suite {name!r}.") from None
        add_cases(suite, cases)
        audit.record(user, "suite.create", suite, name=name, required_to_publish=required_to_publish)
    return suite


def set_required(suite: Suite, required: bool, user: Any = None) -> Suite:
    with transaction.atomic():
        suite.required_to_publish = required
        suite.save(update_fields=["required_to_publish"])
        audit.record(user, "suite.require", suite, required_to_publish=required)
    return suite


def add_cases(
    suite: Suite, cases: Iterable[CaseIn], where: str = "cases", labels: list[str] | None = None
) -> list[SuiteCase]:
    """Write cases to a suite after checking every one (nothing written if one is bad); errors name
    each case as `labels` do (default `cases[i]`)."""
    items = list(cases)
    if suite.cases.count() + len(items) > MAX_CASES:
        raise Invalid(f"{where}: a suite holds at most {MAX_CASES} cases.")
    labels = labels or [f"{where}[{i}]" for i in range(len(items))]
    rows = [case_row(suite, item, label) for item, label in zip(items, labels, strict=True)]
    with transaction.atomic():
        made = SuiteCase.objects.bulk_create(rows)
    return made


def case_row(suite: Suite, item: CaseIn, where: str) -> SuiteCase:
    try:
        runs.check_input(item.input)
    except Invalid as exc:
        raise Invalid(f"{where}: {exc.message}") from None
    origin = origin_run(suite.workflow, item.origin, where) if item.origin is not None else None
    if not isinstance(item.expectations, list):
        raise Invalid(f"{where}: expectations: must be a list of expectations.")
    for i, raw in enumerate(item.expectations):
        try:
            expectations.parse(raw)
        except expectations.BadExpectation as exc:
            raise Invalid(f"{where}: expectations[{i}].{exc.field}: {exc.message}") from None
    name = (item.name or (f"run {origin.pk}" if origin else "case"))[:200]
    return SuiteCase(suite=suite, name=name, input=item.input, origin=origin, expectations=item.expectations)


def origin_run(workflow: Workflow, run_id: int, where: str) -> Run:
    run = Run.objects.filter(pk=run_id, workflow=workflow).first()
    if run is None:
        raise Invalid(f"{where}: origin: workflow {workflow.slug!r} has no run {run_id}.")
    return run


# --------------------------------------------------------------------------- from runs


def case_of_run(run: Run) -> CaseIn:
    """A case from a finished run: its input, itself as origin, its final output expected."""
    final = runs.run_output(run)
    return CaseIn(run.input, f"run {run.pk}", run.pk, [{"kind": "equals", "value": final}])


def recent_runs(workflow: Workflow, last: int, search: RunSearch | None = None) -> list[Run]:
    """The last `last` runs of the workflow that `search` finds (default: those that succeeded)."""
    if not 1 <= last <= MAX_FROM_RUNS:
        raise Invalid(f"last: from 1 to {MAX_FROM_RUNS} runs.")
    search = search or RunSearch(status=RunStatus.SUCCEEDED)
    found = search.apply(Run.objects.filter(workflow=workflow, suite_case__isnull=True))
    return list(found.order_by("-id")[:last])


def picked_runs(workflow: Workflow, run_ids: list[int]) -> list[Run]:
    """The runs picked by id, each of the workflow and succeeded (refused naming the first that is not)."""
    if not run_ids or len(run_ids) > MAX_FROM_RUNS:
        raise Invalid(f"runs: pick from 1 to {MAX_FROM_RUNS} runs.")
    found = {r.pk: r for r in Run.objects.filter(pk__in=run_ids, workflow=workflow)}
    for i, run_id in enumerate(run_ids):
        run = found.get(run_id)
        if run is None:
            raise Invalid(f"runs[{i}]: workflow {workflow.slug!r} has no run {run_id}.")
        if run.status != RunStatus.SUCCEEDED:
            raise Invalid(f"runs[{i}]: run {run_id} {run.status}; only a succeeded run can be a case.")
    return [found[r] for r in run_ids]


def add_runs(suite: Suite, picked: list[Run], user: Any = None) -> list[SuiteCase]:
    with transaction.atomic():
        made = add_cases(suite, [case_of_run(r) for r in picked], "runs")
        audit.record(user, "suite.add_runs", suite, runs=[r.pk for r in picked])
    return made


# --------------------------------------------------------------------------- JSONL


def parse_jsonl(text: str) -> list[CaseIn]:
    """Cases from JSONL: one object a line, `{"input": {...}, "name"?, "origin"?, "expectations"?}`;
    blank lines skipped; a bad line is refused naming its number (from 1)."""
    if len(text) > MAX_UPLOAD_CHARS:
        raise Invalid(f"file: at most {MAX_UPLOAD_CHARS:,} characters; split it into several uploads.")
    cases = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise Invalid(f"line {number}: not JSON ({exc.msg} at column {exc.colno}).") from None
        except RecursionError:
            raise Invalid(f"line {number}: nested too deeply to be a case.") from None
        cases.append(case_in(raw, f"line {number}"))
    if not cases:
        raise Invalid("file: no cases in it; write one JSON object a line.")
    return cases


def case_in(raw: Any, where: str) -> CaseIn:
    if not isinstance(raw, dict):
        raise Invalid(f"{where}: must be a JSON object with an input.")
    unknown = set(raw) - {"input", "name", "origin", "expectations"}
    if unknown:
        raise Invalid(
            f"{where}: {sorted(unknown)[0]} is not a field of a case (input, name, origin, expectations)."
        )
    origin = raw.get("origin")
    if origin is not None and (isinstance(origin, bool) or not isinstance(origin, int)):
        raise Invalid(f"{where}: origin: must be a run id.")
    name = raw.get("name", "")
    if not isinstance(name, str):
        raise Invalid(f"{where}: name: must be text.")
    return CaseIn(raw.get("input", {}), name, origin, raw.get("expectations", []))


def upload(suite: Suite, text: str, user: Any = None) -> list[SuiteCase]:
    """Add the cases of a JSONL text to a suite, all or none; errors name the line."""
    cases = parse_jsonl(text)
    labels = [f"line {line_of(text, i)}" for i in range(len(cases))]
    with transaction.atomic():
        made = add_cases(suite, cases, "file", labels)
        audit.record(user, "suite.upload", suite, cases=len(made))
    return made


def line_of(text: str, index: int) -> int:
    """The line number (from 1) of the `index`-th non-blank line."""
    seen = -1
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            seen += 1
            if seen == index:
                return number
    return index + 1


def person(user: Any) -> Any:
    return user if getattr(user, "is_authenticated", False) else getattr(user, "owner", None)
