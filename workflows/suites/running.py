"""Run a suite against a draft or a version: its cases start as ordinary runs, grouped in a SuiteRun.

Decisions:

- The target is a published version by number, or a draft (by number, or the newest draft):
  a draft is frozen first into a published, inactive snapshot exactly as a test run of a
  draft is (versions/editing.py), and the SuiteRun keeps the draft and its checksum, so
  the publish gate (gate.py) knows which definition passed.
- Each case is an ordinary run (runs.start_run): same workers, same admission, counted
  against the workflow's budgets, at priority LOWEST so live traffic goes first (aging still
  lets it through under a steady load: core/priorities.py).
- Calls: a case with an origin replays the origin's recorded calls in the chosen mode
  (default recorded-then-live); a case without an origin (or whose origin was deleted) runs
  live, whatever the mode, since there is nothing to replay.
- Every case input is checked against the target version's input schema before anything
  is written; the first that fails is refused naming the case and the field. The SuiteRun,
  its case runs and their links are one transaction: nothing half-started. The runs are
  announced to the schedulers after the commit.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from workflows.core import callhash, priorities
from workflows.core.states import RUN_FINISHED
from workflows.runs import actions as runs
from workflows.store import audit
from workflows.store.errors import Invalid, NotFound
from workflows.store.models import Run, WorkflowVersion
from workflows.store.suites import Suite, SuiteCase, SuiteCaseRun, SuiteRun
from workflows.suites.building import person
from workflows.versions import editing

PRIORITY = priorities.LOWEST
DEFAULT_MODE = callhash.RECORDED_THEN_LIVE


def target_version(suite: Suite, number: int | None, draft: bool) -> WorkflowVersion:
    """Version `number` of the suite's workflow, or with `draft` and no number its newest draft."""
    versions = suite.workflow.versions
    if number is None and draft:
        found = versions.filter(status=WorkflowVersion.DRAFT).order_by("-number").first()
        if found is None:
            raise NotFound(f"Workflow {suite.workflow.slug!r} has no draft; save one in the editor first.")
        return found
    if number is None:
        if suite.workflow.active_version is None:
            raise NotFound(f"Workflow {suite.workflow.slug!r} has no active version; name one.")
        return suite.workflow.active_version
    found = versions.filter(number=number).first()
    if found is None:
        raise NotFound(f"version: workflow {suite.workflow.slug!r} has no version {number}.")
    if draft and found.is_published:
        raise Invalid(f"version: version {number} is published, not a draft.")
    return found


def start_suite_run(
    suite: Suite, number: int | None = None, draft: bool = False, calls: str | None = None, user: Any = None
) -> SuiteRun:
    """Start every case of `suite` as a run of the chosen version (a draft frozen first)."""
    mode = calls or DEFAULT_MODE
    if mode not in callhash.MODES:
        raise Invalid(f"mode: {mode!r} is not a mode; use one of {', '.join(callhash.MODES)}.")
    version = target_version(suite, number, draft)
    cases = list(suite.cases.all())
    if not cases:
        raise Invalid(f"suite: suite {suite.name!r} has no cases; add some first.")
    with transaction.atomic():
        pinned = version if version.is_published else editing.freeze_draft(version, user)
        check_inputs(cases, pinned)
        suite_run = SuiteRun.objects.create(
            suite=suite,
            version=pinned,
            draft=None if version.is_published else version,
            checksum=version.checksum,
            calls=mode,
            created_by=person(user),
        )
        SuiteCaseRun.objects.bulk_create(start_case(suite_run, case, pinned, mode) for case in cases)
        audit.record(user, "suite.run", suite, suite_run=suite_run.pk, version=version.number, calls=mode)
    return suite_run


def check_inputs(cases: list[SuiteCase], version: WorkflowVersion) -> None:
    for case in cases:
        try:
            runs.check_input_schema(version.pk, case.input)
        except Invalid as exc:
            fields = ", ".join(i.path for i in exc.issues) or "input"
            raise Invalid(
                f"case {case.name!r} (id {case.pk}): its input does not match version {version.number}'s "
                f"input schema at {fields}; fix the case or the schema.",
                exc.issues,
            ) from None


def start_case(suite_run: SuiteRun, case: SuiteCase, version: WorkflowVersion, mode: str) -> SuiteCaseRun:
    run, _ = runs.start_run(version.workflow, case.input, version=version, priority=PRIORITY)
    calls = mode if case.origin_id is not None else callhash.LIVE
    return SuiteCaseRun(
        suite_run=suite_run,
        case=case,
        case_name=case.name,
        run=run,
        origin_id=case.origin_id,
        calls=calls,
        expectations=case.expectations,
    )


def get_suite_run(suite_run_id: int) -> SuiteRun:
    try:
        return SuiteRun.objects.select_related("suite", "suite__workflow", "version", "draft").get(
            pk=suite_run_id
        )
    except SuiteRun.DoesNotExist:
        raise NotFound(f"There is no suite run {suite_run_id}.") from None


def case_runs(suite_run: SuiteRun) -> list[SuiteCaseRun]:
    """The suite run's cases, each with its run (status, times)."""
    return list(suite_run.cases.select_related("run").order_by("id"))


def unfinished(suite_run: SuiteRun) -> int:
    """How many of the suite run's case runs have not ended."""
    ended = Run.objects.filter(suite_case__suite_run=suite_run, status__in=RUN_FINISHED)
    return suite_run.cases.count() - ended.count()
