"""Suites over the API: built from runs or JSONL, run against a draft, read back; every refusal names
the field, line or case, and leaves nothing behind."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.api.conftest import Api, assert_problem
from tests.integration.conftest import node, publish
from workflows.runs import actions as runs
from workflows.store.models import NodeRun, Run, Workflow, WorkflowVersion
from workflows.store.suites import Suite, SuiteCase, SuiteRun
from workflows.versions import publish as versions

pytestmark = pytest.mark.django_db

CHAIN = {"nodes": [node("first"), node("second")], "edges": [{"source": "first", "target": "second"}]}


def finished_run(workflow: Workflow, n: int) -> Run:
    run, _ = runs.start_run(workflow, {"n": n})
    for row in NodeRun.objects.filter(run=run):
        NodeRun.objects.filter(pk=row.pk).update(status="succeeded", attempt=1, output={"n": n})
    Run.objects.filter(pk=run.pk).update(status="succeeded")
    return run


@pytest.fixture
def flow(db: Any) -> Workflow:
    return publish("flow", CHAIN)


def test_a_suite_built_from_the_last_runs_has_a_case_per_run_expecting_its_output(
    api: Api, flow: Workflow
) -> None:
    made = [finished_run(flow, n) for n in range(3)]
    answer = api.post("workflows/flow/suites", {"name": "recent", "from_runs": {"last": 2}})
    assert answer.status_code == 201, answer.content
    suite = answer.json()
    assert answer["Location"] == suite["url"]
    assert [c["origin"] for c in suite["case_list"]] == [made[2].pk, made[1].pk]
    assert suite["case_list"][0]["expectations"] == [{"kind": "equals", "value": {"second": {"n": 2}}}]
    assert suite["case_list"][0]["input"] == {"n": 2}


def test_picked_runs_that_did_not_succeed_are_refused_naming_the_run(api: Api, flow: Workflow) -> None:
    good = finished_run(flow, 1)
    running, _ = runs.start_run(flow, {"n": 2})
    answer = api.post(
        "workflows/flow/suites", {"name": "picked", "from_runs": {"runs": [good.pk, running.pk]}}
    )
    body = assert_problem(answer, 422)
    assert f"runs[1]: run {running.pk} running" in body["detail"]
    assert not Suite.objects.exists()


def test_a_malformed_jsonl_line_is_refused_naming_its_number_and_nothing_is_added(
    api: Api, flow: Workflow
) -> None:
    suite = api.post("workflows/flow/suites", {"name": "upload"}).json()
    text = "\n".join(
        [json.dumps({"input": {"n": 1}}), "", json.dumps({"input": {"n": 2}}), '{"input": {"n": 3}']
    )
    body = assert_problem(api.post(f"suites/{suite['id']}/cases/upload", {"jsonl": text}), 422)
    assert body["detail"].startswith("line 4: not JSON")
    bad_field = "\n".join([json.dumps({"input": {"n": 1}}), json.dumps({"input": 5})])
    body = assert_problem(api.post(f"suites/{suite['id']}/cases/upload", {"jsonl": bad_field}), 422)
    assert body["detail"].startswith("line 2: input must be a JSON object")
    assert not SuiteCase.objects.exists()
    good = "\n".join(json.dumps({"input": {"n": n}, "name": f"n{n}"}) for n in range(3))
    answer = api.post(f"suites/{suite['id']}/cases/upload", {"jsonl": good})
    assert answer.status_code == 201
    assert [c["name"] for c in answer.json()] == ["n0", "n1", "n2"]


def test_a_json_path_that_does_not_parse_is_a_422_naming_the_path_and_the_character(
    api: Api, flow: Workflow
) -> None:
    case = {"input": {}, "expectations": [{"kind": "path_equals", "path": "$.a..b", "value": 1}]}
    body = assert_problem(api.post("workflows/flow/suites", {"name": "paths", "cases": [case]}), 422)
    assert "cases[0]: expectations[0].path: '$.a..b' does not parse at character 4" in body["detail"]
    assert not Suite.objects.exists()


def test_a_case_whose_input_fails_the_versions_input_schema_is_refused_naming_case_and_field(
    api: Api, flow: Workflow
) -> None:
    suite = api.post(
        "workflows/flow/suites",
        {"name": "typed", "cases": [{"input": {"n": 1}, "name": "ok"}, {"input": {}, "name": "bare"}]},
    ).json()
    schema = {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}
    versions.create_version(flow, {**CHAIN, "input_schema": schema})
    before = Run.objects.count()
    body = assert_problem(api.post(f"suites/{suite['id']}/runs", {"draft": True}), 422)
    assert body["detail"].startswith("case 'bare'")
    assert "input schema at $.n" in body["detail"] or "input schema at" in body["detail"]
    assert Run.objects.count() == before and not SuiteRun.objects.exists()


def test_a_suite_run_of_a_draft_starts_its_cases_at_low_priority_and_reads_back_running(
    api: Api, flow: Workflow
) -> None:
    origin = finished_run(flow, 7)
    suite = api.post("workflows/flow/suites", {"name": "one", "from_runs": {"runs": [origin.pk]}}).json()
    versions.create_version(flow, {**CHAIN, "description": "a draft"})
    answer = api.post(f"suites/{suite['id']}/runs", {"draft": True, "mode": "recorded"})
    assert answer.status_code == 201, answer.content
    started = answer.json()
    assert started["state"] == "running" and started["calls"] == "recorded" and started["draft"] == 2
    (case,) = started["cases"]
    assert case["origin"] == origin.pk and case["calls"] == "recorded"
    assert case["comparison"] == f"/api/v1/runs/{origin.pk}/comparison/{case['run']}"
    run = Run.objects.get(pk=case["run"])
    assert run.priority == -100 and run.input == {"n": 7} and run.version.number == 3  # the draft's snapshot
    assert api.get(started["url"]).json()["state"] == "running"


def test_an_operator_may_run_a_suite_on_a_version_but_not_on_a_draft_nor_create_one(
    api: Api, api_as: Callable[..., Api], flow: Workflow
) -> None:
    suite = api.post("workflows/flow/suites", {"name": "ops", "cases": [{"input": {}}]}).json()
    operator = api_as("operator", "read", "run")
    assert_problem(operator.post("workflows/flow/suites", {"name": "mine"}), 403)
    assert operator.post(f"suites/{suite['id']}/runs", {"version": 1}).status_code == 201
    versions.create_version(flow, CHAIN)
    assert_problem(operator.post(f"suites/{suite['id']}/runs", {"draft": True}), 403)


def test_publishing_a_draft_is_refused_while_a_required_suite_has_not_passed_on_it(
    api: Api, flow: Workflow
) -> None:
    api.post("workflows/flow/suites", {"name": "gate", "required_to_publish": True, "cases": [{"input": {}}]})
    draft = versions.create_version(flow, {**CHAIN, "description": "changed"})
    body = assert_problem(api.post(f"workflows/flow/versions/{draft.number}/publish", {}), 409)
    assert "required suite 'gate' has not run on this draft" in body["detail"]
    assert WorkflowVersion.objects.get(pk=draft.pk).status == WorkflowVersion.DRAFT


def test_testing_against_recent_runs_refreshes_the_recent_suite_with_the_last_runs_and_runs_it_on_the_draft(
    api: Api, flow: Workflow
) -> None:
    made = [finished_run(flow, n) for n in range(4)]
    draft = versions.create_version(flow, {**CHAIN, "description": "a draft"})
    first = api.post("workflows/flow/suites/recent-runs", {"last": 2})
    assert first.status_code == 201, first.content
    assert [c["origin"] for c in first.json()["cases"]] == [made[3].pk, made[2].pk]
    assert first.json()["draft"] == draft.number
    later = finished_run(flow, 9)
    second = api.post("workflows/flow/suites/recent-runs", {"last": 2, "mode": "recorded"}).json()
    assert sorted(c["origin"] for c in second["cases"]) == [made[3].pk, later.pk]
    suite = Suite.objects.get(name="recent runs")
    assert sorted(suite.cases.values_list("origin_id", flat=True)) == [made[3].pk, later.pk]
    assert SuiteRun.objects.filter(suite=suite).count() == 2


def test_testing_against_recent_runs_of_a_workflow_that_has_none_is_a_422_naming_last(
    api: Api, flow: Workflow
) -> None:
    body = assert_problem(api.post("workflows/flow/suites/recent-runs", {"last": 5, "version": 1}), 422)
    assert body["detail"].startswith("last: this workflow has no succeeded runs")
    assert not Suite.objects.exists()


def test_a_suite_run_keeps_its_cases_expectations_when_the_suite_changes_under_it(
    api: Api, flow: Workflow
) -> None:
    made = [finished_run(flow, n) for n in range(2)]
    first = api.post("workflows/flow/suites/recent-runs", {"last": 1, "version": 1}).json()
    finished_run(flow, 5)
    api.post("workflows/flow/suites/recent-runs", {"last": 1, "version": 1})  # the first case is deleted
    kept = SuiteRun.objects.get(pk=first["id"]).cases.get()
    assert kept.case_id is None and kept.case_name == f"run {made[1].pk}"
    assert kept.expectations == [{"kind": "equals", "value": {"second": {"n": 1}}}]
