"""Regression suites end to end: real workers and scheduler, a fake LLM provider that counts calls.

The workflow asks the model to classify a case, then takes one of two branches on the input's
kind, each an llm.chat call. A suite of its recorded runs is run against a draft that changes
the prompt of one branch only.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from tests.fakes.llm_server import FakeLLMServer
from tests.integration.conftest import publish, two_workers_and_a_scheduler, wait_finished
from tests.integration.runtime import Runtime, wait_for
from workflows.runs import actions as runs
from workflows.store.errors import Conflict
from workflows.store.models import Run, Workflow, WorkflowVersion
from workflows.store.suites import Suite, SuiteRun
from workflows.suites import building, reports, running
from workflows.versions import publish as versions

KINDS = ["refund", "other", "other"] * 4  # 12 cases, 4 of them take the refund branch


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


@pytest.fixture
def suite_runtime(transactional_db: Any, redis_clean: None, llm: FakeLLMServer) -> Iterator[Runtime]:
    yield from two_workers_and_a_scheduler(LLM_BASE_URL=llm.base_url, LLM_MODEL="fake-model")


def definition(refund_prompt: str = "refund {input.n}") -> dict[str, Any]:
    def chat(node_id: str, prompt: str) -> dict[str, Any]:
        return {"id": node_id, "handler": "llm.chat", "config": {"prompt": prompt}}

    return {
        "nodes": [
            chat("ask", "classify {input.n}"),
            chat("refund", refund_prompt),
            chat("other", "answer {input.n}"),
        ],
        "edges": [
            {"source": "ask", "target": "refund", "when": 'input.kind == "refund"'},
            {"source": "ask", "target": "other", "when": 'input.kind != "refund"'},
        ],
    }


def recorded_runs(workflow: Workflow, kinds: list[str]) -> list[Run]:
    started = [runs.start_run(workflow, {"kind": k, "n": i})[0] for i, k in enumerate(kinds)]
    finished = [wait_finished(r) for r in started]
    assert {r.status for r in finished} == {"succeeded"}
    return finished


def draft(workflow: Workflow, refund_prompt: str) -> WorkflowVersion:
    return versions.create_version(workflow, definition(refund_prompt))


def evaluated(suite_run: SuiteRun, timeout: float = 90.0) -> reports.Report:
    def done() -> reports.Report | None:
        found = reports.report(suite_run.pk)
        return found if found.state != "running" else None

    return wait_for(done, timeout, f"suite run {suite_run.pk} to be evaluated")


def suite_of_recent_runs(kinds: list[str], required: bool = False) -> tuple[Workflow, Suite, list[Run]]:
    workflow = publish("triage", definition())
    made = recorded_runs(workflow, kinds)
    picked = building.recent_runs(workflow, len(kinds))
    suite = building.create_suite(
        workflow, "recent", required_to_publish=required, cases=[building.case_of_run(r) for r in picked]
    )
    return workflow, suite, made


def test_a_suite_of_recorded_runs_against_a_draft_that_changes_one_branch_fails_exactly_the_cases_that_take_it(
    suite_runtime: Runtime, llm: FakeLLMServer
) -> None:
    workflow, suite, made = suite_of_recent_runs(KINDS)
    before = len(llm.requests)
    draft(workflow, "refund v2 {input.n}")
    found = evaluated(running.start_suite_run(suite, draft=True))
    refunds = {f"run {r.pk}" for r in made if r.input["kind"] == "refund"}
    assert found.state == "failed"
    assert {c.case_name for c in found.failing} == refunds
    assert {c.case_name: c.changed for c in found.failing} == {name: ["refund"] for name in refunds}
    assert all(c.changed == [] for c in found.cases if c.passed)
    # recorded-then-live: only the changed branch's 4 calls reached the provider.
    asked = sorted(r.json["messages"][-1]["content"] for r in llm.requests[before:])
    assert asked == sorted(f"refund v2 {r.input['n']}" for r in made if r.input["kind"] == "refund")
    assert all(c.run.priority == running.PRIORITY for c in found.cases)
    message = found.failing[0].verdicts[0]["message"]
    assert message.startswith("equals on the final output: differs at $.refund.")
    assert '$.refund.content (expected "echo: refund ' in message


def test_a_publish_gated_on_a_failing_suite_is_refused_naming_the_failing_cases_and_passes_once_it_passes(
    suite_runtime: Runtime,
) -> None:
    workflow, suite, made = suite_of_recent_runs(["refund", "other"], required=True)
    changed = draft(workflow, "refund v2 {input.n}")
    with pytest.raises(Conflict, match="has not run on this draft"):
        versions.publish_version(changed)
    assert evaluated(running.start_suite_run(suite, draft=True)).state == "failed"
    refund = next(r for r in made if r.input["kind"] == "refund")
    with pytest.raises(Conflict, match=rf"failing cases: run {refund.pk}\)"):
        versions.publish_version(changed)
    assert WorkflowVersion.objects.get(pk=changed.pk).status == WorkflowVersion.DRAFT
    # The same draft with the old prompt back passes, and then publishes.
    from workflows.versions import drafts

    same = drafts.update_draft(changed.pk, definition(), changed.revision, None)
    assert evaluated(running.start_suite_run(suite, draft=True)).state == "passed"
    assert versions.publish_version(same).status == WorkflowVersion.PUBLISHED


def test_workflow_test_writes_junit_that_a_junit_parser_reads_back_and_exits_non_zero_on_failures(
    suite_runtime: Runtime, tmp_path: Path
) -> None:
    workflow, suite, made = suite_of_recent_runs(["refund", "other", "other"])
    draft(workflow, "refund v2 {input.n}")
    out = tmp_path / "suite.xml"
    with pytest.raises(CommandError) as caught:
        call_command(
            "workflow",
            "test",
            "triage",
            "--suite",
            "recent",
            "--draft",
            "--junit",
            str(out),
            "--timeout",
            "90",
        )
    assert caught.value.returncode == 1
    root = ET.parse(out).getroot()
    testsuite = root.find("testsuite")
    assert testsuite is not None
    assert (testsuite.get("tests"), testsuite.get("failures"), testsuite.get("errors")) == ("3", "1", "0")
    cases = {c.get("name"): c for c in testsuite.iter("testcase")}
    assert set(cases) == {f"run {r.pk}" for r in made}
    refund = next(r for r in made if r.input["kind"] == "refund")
    failure = cases[f"run {refund.pk}"].find("failure")
    assert failure is not None and failure.get("message", "").startswith(
        "equals on the final output: differs at $.refund."
    )
    assert all(c.find("failure") is None for name, c in cases.items() if name != f"run {refund.pk}")
    # The published version itself passes: exit 0 (no exception).
    call_command("workflow", "test", "triage", "--suite", "recent", "--version", "1", "--junit", str(out))
    assert ET.parse(out).getroot().find("testsuite").get("failures") == "0"  # type: ignore[union-attr]


def test_kill_9_of_a_worker_during_a_suite_loses_no_case(suite_runtime: Runtime, llm: FakeLLMServer) -> None:
    workflow, suite, made = suite_of_recent_runs(["other"] * 10)
    llm.delay = 0.3  # live calls take a while: the kill lands while cases are in flight
    before = len(llm.requests)
    suite_run = running.start_suite_run(suite, calls="live")  # every call live: 20, none replayed
    wait_for(lambda: len(llm.requests) > before + 2, 60, "the suite's first live calls")
    suite_runtime.kill("worker-1")
    suite_runtime.worker("worker-3")
    found = evaluated(suite_run, 180)
    assert len(found.cases) == 10
    assert all(c.run.status == "succeeded" for c in found.cases)
    assert found.state == "passed"
    assert SuiteRun.objects.filter(pk=suite_run.pk, evaluated_at__isnull=False).count() == 1


def test_a_judge_is_an_llm_call_with_the_rubric_and_its_verdict_is_marked_as_a_judges(
    suite_runtime: Runtime, llm: FakeLLMServer
) -> None:
    from tests.fakes.llm_server import echo_completion

    def judge_or_echo(request: Any) -> Any:
        system = request["messages"][0]
        if system["role"] != "system" or "rubric" not in system["content"]:
            return echo_completion(request)
        said = request["messages"][-1]["content"]
        answer = echo_completion(request)
        answer["choices"][0]["message"]["content"] = "PASS" if "refund" in said else "FAIL: no refund"
        return answer

    llm.reply = judge_or_echo
    workflow = publish("triage", definition())
    (run,) = recorded_runs(workflow, ["refund"])
    rubric = {"kind": "judge", "node": "refund", "path": "$.content", "rubric": "It talks of a refund."}
    wrong = {**rubric, "node": "ask"}
    suite = building.create_suite(
        workflow,
        "judged",
        cases=[
            building.CaseIn(run.input, "right", run.pk, [rubric]),
            building.CaseIn(run.input, "wrong", run.pk, [wrong]),
        ],
    )
    before = len(llm.requests)
    found = evaluated(running.start_suite_run(suite))
    verdicts = {c.case_name: c.verdicts for c in found.cases}
    assert verdicts["right"] == [
        {"expectation": "judge on node refund at $.content", "passed": True, "message": "", "judge": True}
    ]
    (failed,) = verdicts["wrong"]
    assert failed["judge"] and not failed["passed"]
    assert failed["message"].endswith("(judge): FAIL: no refund")
    # Two judge calls, and nothing else: the cases replayed every call of their origin.
    assert len(llm.requests) - before == 2
