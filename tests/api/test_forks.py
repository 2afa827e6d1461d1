"""Forking a run over the API: the new run, its links both ways, and every refusal leaving nothing behind."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import Api, assert_problem
from tests.integration.conftest import node, publish
from workflows.forks import forking
from workflows.runs import actions as runs
from workflows.store.forks import RunFork
from workflows.store.models import AuditEntry, NodeRun, RecordedCall, Run, Workflow, WorkflowVersion
from workflows.versions import publish as versions

pytestmark = pytest.mark.django_db

THREE = {
    "nodes": [node("first"), node("second"), node("third")],
    "edges": [{"source": "first", "target": "second"}, {"source": "second", "target": "third"}],
}


def finished_run(workflow: Workflow) -> Run:
    """A run of `workflow` whose nodes all succeeded, each with an output naming it."""
    run, _ = runs.start_run(workflow, {"who": "ana"})
    for n in NodeRun.objects.filter(run=run):
        NodeRun.objects.filter(pk=n.pk).update(status="succeeded", attempt=1, output={"from": n.node_id})
    Run.objects.filter(pk=run.pk).update(status="succeeded")
    return run


def with_node(definition: dict[str, Any], node_id: str, timeout: float) -> dict[str, Any]:
    """The definition with one node changed (its timeout)."""
    nodes = [{**n, "timeout_seconds": timeout} if n["id"] == node_id else n for n in definition["nodes"]]
    return {**definition, "nodes": nodes}


def nothing_created(before: int) -> bool:
    return Run.objects.count() == before and not RunFork.objects.exists()


@pytest.fixture
def three(db: Any) -> Workflow:
    return publish("three", THREE)


def test_a_fork_carries_the_nodes_above_and_runs_the_rest_linked_both_ways(api: Api, three: Workflow) -> None:
    origin = finished_run(three)
    answer = api.post(f"runs/{origin.pk}/forks", {"node_id": "second"})
    assert answer.status_code == 201, answer.content
    fork = answer.json()
    assert answer["Location"] == fork["url"]
    assert fork["status"] == "running" and fork["version"] == origin.version.number
    states = {n["node_id"]: (n["status"], n["output"]) for n in fork["nodes"]}
    assert states == {
        "first": ("succeeded", {"from": "first"}),
        "second": ("pending", None),
        "third": ("pending", None),
    }
    assert fork["forked_from"]["run"] == origin.pk and fork["forked_from"]["carried"] == ["first"]
    assert fork["forked_from"]["node_id"] == "second"
    back = api.get(f"runs/{origin.pk}").json()
    assert [(f["run"], f["node_id"]) for f in back["forks"]] == [(fork["id"], "second")]
    assert back["forked_from"] is None
    assert AuditEntry.objects.filter(action="run.fork", target_id=str(origin.pk)).exists()


def test_a_fork_onto_a_newer_version_with_edited_input_gives_the_fork_point_that_input(
    api: Api, three: Workflow
) -> None:
    origin = finished_run(three)
    newer = publish("three", with_node(THREE, "third", 30))
    answer = api.post(
        f"runs/{origin.pk}/forks",
        {"node_id": "second", "version": newer.active_version.number, "input": {"x": 1}},
    )
    assert answer.status_code == 201, answer.content
    assert answer.json()["version"] == newer.active_version.number
    rows = {n.node_id: n.input_override for n in NodeRun.objects.filter(run_id=answer.json()["id"])}
    assert rows == {"first": None, "second": {"x": 1}, "third": None}


def test_a_fork_onto_a_draft_freezes_it_and_needs_the_editor_role(api_as: Any, three: Workflow) -> None:
    origin = finished_run(three)
    draft = versions.create_version(three, with_node(THREE, "second", 30))
    before = Run.objects.count()
    body = {"node_id": "second", "version": draft.number}
    assert_problem(api_as("operator", "run").post(f"runs/{origin.pk}/forks", body), 403)
    assert nothing_created(before)
    answer = api_as("editor", "run", "edit").post(f"runs/{origin.pk}/forks", body)
    assert answer.status_code == 201, answer.content
    snapshot = WorkflowVersion.objects.get(workflow=three, number=answer.json()["version"])
    assert snapshot.is_published and snapshot.checksum == draft.checksum


def test_forking_needs_the_run_scope_and_the_operator_role(api_as: Any, three: Workflow) -> None:
    origin = finished_run(three)
    assert_problem(api_as("viewer", "run").post(f"runs/{origin.pk}/forks", {"node_id": "second"}), 403)
    assert_problem(api_as("operator", "read").post(f"runs/{origin.pk}/forks", {"node_id": "second"}), 403)
    assert api_as("operator", "run").post(f"runs/{origin.pk}/forks", {"node_id": "second"}).status_code == 201


def test_an_unknown_node_or_version_is_a_404_and_creates_nothing(api: Api, three: Workflow) -> None:
    origin = finished_run(three)
    before = Run.objects.count()
    assert (
        "no node 'nope'"
        in assert_problem(api.post(f"runs/{origin.pk}/forks", {"node_id": "nope"}), 404)["detail"]
    )
    assert_problem(api.post(f"runs/{origin.pk}/forks", {"node_id": "second", "version": 99}), 404)
    assert_problem(api.post("runs/999999/forks", {"node_id": "second"}), 404)
    assert nothing_created(before)


def test_a_version_lacking_the_fork_point_is_refused_naming_it(api: Api, three: Workflow) -> None:
    origin = finished_run(three)
    smaller = publish("three", {"nodes": [node("first"), node("third")], "edges": []})
    before = Run.objects.count()
    body = {"node_id": "second", "version": smaller.active_version.number}
    problem = assert_problem(api.post(f"runs/{origin.pk}/forks", body), 422, "node_id")
    assert problem["errors"][0]["node"] == "second" and problem["errors"][0]["code"] == "missing_node"
    assert nothing_created(before)


def test_changed_upstream_nodes_are_refused_each_named_and_a_draft_is_not_frozen(
    api: Api, three: Workflow
) -> None:
    origin = finished_run(three)
    draft = versions.create_version(three, with_node(THREE, "first", 30))
    before, versions_before = Run.objects.count(), WorkflowVersion.objects.count()
    body = {"node_id": "third", "version": draft.number}
    problem = assert_problem(api.post(f"runs/{origin.pk}/forks", body), 422, "node_id")
    assert [(e["node"], e["code"]) for e in problem["errors"]] == [("first", "changed_upstream")]
    assert "'first'" in problem["detail"]
    assert nothing_created(before) and WorkflowVersion.objects.count() == versions_before


def test_an_upstream_node_still_running_refuses_the_fork_but_the_node_above_it_can_be_forked(
    api: Api, three: Workflow
) -> None:
    origin, _ = runs.start_run(three, {})
    NodeRun.objects.filter(run=origin, node_id="first").update(status="succeeded", output={"a": 1})
    NodeRun.objects.filter(run=origin, node_id="second").update(status="running", attempt=1)
    problem = assert_problem(api.post(f"runs/{origin.pk}/forks", {"node_id": "third"}), 422, "node_id")
    assert [(e["node"], e["code"]) for e in problem["errors"]] == [("second", "unfinished_upstream")]
    assert api.post(f"runs/{origin.pk}/forks", {"node_id": "second"}).status_code == 201
    assert NodeRun.objects.get(run=origin, node_id="second").status == "running", "the origin is left alone"


def test_edited_input_that_is_not_an_object_is_refused(api: Api, three: Workflow) -> None:
    origin = finished_run(three)
    assert_problem(api.post(f"runs/{origin.pk}/forks", {"node_id": "second", "input": [1]}), 422, "input")


def test_the_comparison_resource_puts_a_fork_beside_its_origin_node_by_node(
    api: Api, three: Workflow
) -> None:
    origin = finished_run(three)
    fork_id = api.post(f"runs/{origin.pk}/forks", {"node_id": "second"}).json()["id"]
    NodeRun.objects.filter(run_id=fork_id, node_id="second").update(
        status="succeeded", attempt=1, output={"n": 2}
    )
    answer = api.get(f"runs/{origin.pk}/comparison/{fork_id}")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert (body["left"]["run"]["id"], body["right"]["run"]["id"]) == (origin.pk, fork_id)
    assert body["right"]["forked_from"] == origin.pk and body["right"]["fork_node"] == "second"
    nodes = {n["node_id"]: n for n in body["nodes"]}
    assert [nodes[n]["verdict"] for n in ("first", "second", "third")] == ["same", "changed", "changed"]
    assert nodes["first"]["right"]["carried"] and not nodes["first"]["left"]["carried"]
    assert [(c["path"], c["kind"]) for c in nodes["second"]["output_diff"]["changes"]] == [
        ("$.from", "removed"),
        ("$.n", "added"),
    ]
    assert body["counts"] == {"same": 1, "changed": 2}
    assert body["right"]["attempts"] == 1


def test_runs_of_two_workflows_are_refused_naming_the_other_run(api: Api, three: Workflow) -> None:
    other = finished_run(publish("other", THREE))
    problem = assert_problem(api.get(f"runs/{finished_run(three).pk}/comparison/{other.pk}"), 422)
    assert "only runs of one workflow" in problem["detail"]
    assert_problem(api.get(f"runs/{other.pk}/comparison/999999"), 404)


def test_a_nodes_recorded_calls_are_listed_with_their_hash_and_how_they_were_answered(
    api: Api, three: Workflow
) -> None:
    origin = finished_run(three)
    node_run = NodeRun.objects.get(run=origin, node_id="second")
    fields = {"run": origin, "node_run": node_run, "node_id": "second", "attempt": 1, "request": {}}
    live = RecordedCall.objects.create(kind="llm", step="turn 1", request_hash="a" * 64, **fields)
    RecordedCall.objects.create(
        kind="tool", request_hash="b" * 64, outcome="replayed", replayed_from=live, **fields
    )
    answer = api.get(f"runs/{origin.pk}/nodes/second/calls")
    assert answer.status_code == 200, answer.content
    assert [
        (c["kind"], c["step"], c["request_hash"][:3], c["outcome"], c["replayed_from_run"])
        for c in answer.json()
    ] == [
        ("llm", "turn 1", "aaa", "live", None),
        ("tool", "", "bbb", "replayed", origin.pk),
    ]
    assert api.get(f"runs/{origin.pk}/nodes/first/calls").json() == []
    assert_problem(api.get("runs/999999/nodes/first/calls"), 404)


def test_an_unknown_calls_mode_is_refused_naming_the_field(api: Api, three: Workflow) -> None:
    origin = finished_run(three)
    assert_problem(
        api.post(f"runs/{origin.pk}/forks", {"node_id": "second", "calls": "sometimes"}), 422, "calls"
    )
    fork = api.post(f"runs/{origin.pk}/forks", {"node_id": "second", "calls": "recorded"}).json()
    assert fork["forked_from"]["calls"] == "recorded"


def test_a_fork_still_says_it_is_one_once_its_origin_is_deleted(api: Api, three: Workflow) -> None:
    origin = finished_run(three)
    fork_id = api.post(f"runs/{origin.pk}/forks", {"node_id": "second"}).json()["id"]
    Run.objects.filter(pk=origin.pk).delete()  # as retention deletes runs
    link = api.get(f"runs/{fork_id}").json()["forked_from"]
    assert (link["run"], link["origin_id"], link["url"], link["comparison_url"]) == (
        None,
        origin.pk,
        None,
        None,
    )


def test_a_fork_asked_again_with_its_idempotency_key_answers_the_first_fork(
    api: Api, three: Workflow
) -> None:
    origin = finished_run(three)
    key = {"Idempotency-Key": "fork-second-1"}
    first = api.post(f"runs/{origin.pk}/forks", {"node_id": "second"}, headers=key)
    assert first.status_code == 201, first.content
    again = api.post(f"runs/{origin.pk}/forks", {"node_id": "second"}, headers=key)
    assert again.status_code == 200 and again["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"] and again["Location"] == first["Location"]
    assert RunFork.objects.count() == 1

    other = api.post(f"runs/{origin.pk}/forks", {"node_id": "third"}, headers=key)
    assert_problem(other, 409)
    assert "another request" in other.json()["detail"]
    start = api.post("workflows/three/runs", {"input": {}}, headers=key)  # a start may not take it either
    assert_problem(start, 409)
    assert RunFork.objects.count() == 1 and Run.objects.count() == 2


def test_fork_once_in_python_makes_one_run_per_key(three: Workflow) -> None:
    origin = finished_run(three)
    made = [forking.fork_once("raced", origin.pk, "second") for _ in range(2)]
    assert [created for _, created in made] == [True, False]
    assert made[0][0].pk == made[1][0].pk
