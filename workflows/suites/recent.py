"""The editor's "Test against recent runs": the workflow's suite of its last N runs, run on a version.

Decisions:

- The suite is named RECENT ("recent runs"), one per workflow, made on first use. Each test
  replaces its cases with the last N succeeded runs (each expecting the output its run had),
  so it always tests what the workflow did lately; a case of a run already in it keeps its
  expectations as written (an author may have edited them).
- It is an ordinary suite: an editor may mark it required to publish, which is how "a passing
  test against recent runs" gates a publish.
- Replacing the cases and starting the suite run are one transaction: a refused start (a case
  input failing the draft's input schema) leaves the suite as it was.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from workflows.store.errors import Invalid
from workflows.store.models import Workflow
from workflows.store.suites import Suite, SuiteRun
from workflows.suites import building, running

RECENT = "recent runs"


def test_recent_runs(
    workflow: Workflow, last: int, number: int | None, draft: bool, calls: str | None = None, user: Any = None
) -> SuiteRun:
    """Refresh the workflow's RECENT suite with its last `last` runs and run it on the chosen version."""
    picked = building.recent_runs(workflow, last)
    if not picked:
        raise Invalid("last: this workflow has no succeeded runs to test against; run it first.")
    with transaction.atomic():
        suite = Suite.objects.select_for_update().filter(workflow=workflow, name=RECENT).first()
        if suite is None:
            suite = building.create_suite(
                workflow, RECENT, "The editor's test against recent runs.", user=user
            )
        kept = {c.origin_id: c for c in suite.cases.filter(origin__in=picked)}
        suite.cases.exclude(pk__in=[c.pk for c in kept.values()]).delete()
        building.add_cases(suite, [building.case_of_run(r) for r in picked if r.pk not in kept], "runs")
        return running.start_suite_run(suite, number, draft, calls, user)
