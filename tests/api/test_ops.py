"""The API's run search, node attempts with their logs, re-run from a node, dead-letter groups."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import Api, assert_problem, dead_letter
from workflows.runs import actions as runs
from workflows.store.models import NodeRun, Run, RunEvent, Workflow

pytestmark = pytest.mark.django_db


def test_run_list_finds_runs_by_input_value(api: Api, chain: Workflow) -> None:
    wanted, _ = runs.start_run(chain, {"customer": "acme", "order": {"total": 12}})
    runs.start_run(chain, {"customer": "globex"})
    found = api.get("runs", input="customer=acme order.total=12")
    assert found.status_code == 200
    assert [r["id"] for r in found.json()["items"]] == [wanted.pk]


def test_run_list_refuses_a_bad_input_term_naming_the_parameter(api: Api) -> None:
    assert_problem(api.get("runs", input="customer"), 400, "input")


def test_run_list_finds_runs_by_failing_node_and_error(api: Api, chain: Workflow) -> None:
    failed = dead_letter(chain, "first")
    runs.start_run(chain, {})
    found = api.get("runs", node_id="first", error="BROKE").json()["items"]
    assert [r["id"] for r in found] == [failed.pk]


def test_node_attempt_is_served_with_its_log(api: Api, chain: Workflow) -> None:
    run, _ = runs.start_run(chain, {})
    RunEvent.objects.create(
        run=run,
        kind="node.attempt",
        node_id="first",
        attempt=1,
        at=run.created_at,
        started_at=run.created_at,
        data={"status": "succeeded", "log": "INFO said hi\n"},
    )
    one = api.get(f"runs/{run.pk}/nodes/first/attempts/1")
    assert one.status_code == 200
    assert (one.json()["log"], one.json()["status"]) == ("INFO said hi\n", "succeeded")
    assert [a["attempt"] for a in api.get(f"runs/{run.pk}/nodes/first/attempts").json()] == [1]
    assert_problem(api.get(f"runs/{run.pk}/nodes/first/attempts/2"), 404)


def test_rerun_from_a_node_needs_the_operate_scope_and_a_finished_run(api_as: Any, chain: Workflow) -> None:
    run, _ = runs.start_run(chain, {})
    operator = api_as("operator", "operate")
    assert_problem(operator.post(f"runs/{run.pk}/rerun", {"node_id": "second"}), 409)
    NodeRun.objects.filter(run=run).update(status="succeeded")
    Run.objects.filter(pk=run.pk).update(status="succeeded")
    assert_problem(api_as("operator", "read").post(f"runs/{run.pk}/rerun", {"node_id": "second"}), 403)
    assert_problem(operator.post(f"runs/{run.pk}/rerun", {"node_id": "nope"}), 404)
    done = operator.post(f"runs/{run.pk}/rerun", {"node_id": "second"})
    assert done.status_code == 200
    assert done.json()["nodes"] == ["second"] and done.json()["run"]["status"] == "running"


def test_dead_letter_groups_count_letters_of_one_node_and_error(api: Api, chain: Workflow) -> None:
    for _ in range(3):
        dead_letter(chain, "first")
    groups = api.get("deadletters/groups").json()
    assert [(g["workflow"], g["node_id"], g["count"]) for g in groups] == [(chain.slug, "first", 3)]


@pytest.mark.parametrize("param", ["input", "error", "node_id"])
def test_run_search_refuses_text_postgres_cannot_hold_naming_the_parameter(api: Api, param: str) -> None:
    value = "a=\x00" if param == "input" else "\x00"
    assert api.get("runs", **{param: value}).status_code == 400
