"""Suites, their cases and their runs (workflows/suites/), as the API answers them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from typing_extensions import TypedDict

from workflows.api.serializers import API
from workflows.store.suites import Suite, SuiteCase, SuiteRun
from workflows.suites.reports import Report, case_json


class CaseOut(TypedDict):
    id: int
    name: str
    input: dict[str, Any]
    origin: int | None
    expectations: list[dict[str, Any]]


class SuiteRunSummary(TypedDict):
    id: int
    url: str
    version: int
    draft: int | None
    calls: str
    state: str  # running | passed | failed
    summary: dict[str, Any]
    created_at: datetime
    evaluated_at: datetime | None


class SuiteOut(TypedDict):
    id: int
    url: str
    workflow: str
    name: str
    description: str
    required_to_publish: bool
    cases: int
    created_at: datetime
    last_run: SuiteRunSummary | None


class SuiteDetail(SuiteOut):
    case_list: list[CaseOut]


class VerdictOut(TypedDict):
    expectation: str
    passed: bool
    message: str
    judge: bool  # decided by an LLM judge (an llm.chat call with the rubric)


class CaseRunOut(TypedDict):
    case: int | None
    name: str
    run: int
    run_status: str
    origin: int | None
    calls: str
    passed: bool | None
    verdicts: list[VerdictOut]
    changed: list[str]  # nodes whose status or output differ from the origin's
    cost: str | None
    comparison: str | None  # the API URL comparing the origin with this case's run


class SuiteRunOut(SuiteRunSummary):
    suite: int
    cases: list[CaseRunOut]


def suite_run_summary(row: SuiteRun) -> SuiteRunSummary:
    state = "running" if row.evaluated_at is None else ("passed" if row.passed else "failed")
    return {
        "id": row.pk,
        "url": f"{API}/suite-runs/{row.pk}",
        "version": row.version.number,
        "draft": row.draft.number if row.draft_id and row.draft else None,
        "calls": row.calls,
        "state": state,
        "summary": row.summary,
        "created_at": row.created_at,
        "evaluated_at": row.evaluated_at,
    }


def suite_out(suite: Suite) -> SuiteOut:
    last = suite.runs.select_related("version", "draft").order_by("-id").first()
    return {
        "id": suite.pk,
        "url": f"{API}/suites/{suite.pk}",
        "workflow": suite.workflow.slug,
        "name": suite.name,
        "description": suite.description,
        "required_to_publish": suite.required_to_publish,
        "cases": suite.cases.count(),
        "created_at": suite.created_at,
        "last_run": suite_run_summary(last) if last else None,
    }


def case_out(case: SuiteCase) -> CaseOut:
    return {
        "id": case.pk,
        "name": case.name,
        "input": case.input,
        "origin": case.origin_id,
        "expectations": case.expectations,
    }


def suite_detail(suite: Suite) -> SuiteDetail:
    return {**suite_out(suite), "case_list": [case_out(c) for c in suite.cases.all()]}


def suite_run_out(found: Report) -> SuiteRunOut:
    cases: list[CaseRunOut] = []
    for c in found.cases:
        comparison = f"{API}/runs/{c.origin_id}/comparison/{c.run_id}" if c.origin_id else None
        cases.append({**case_json(c), "comparison": comparison})  # type: ignore[typeddict-item]  # case_json's keys are CaseRunOut's
    return {**suite_run_summary(found.suite_run), "suite": found.suite_run.suite_id, "cases": cases}
