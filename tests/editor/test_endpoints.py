"""The editor's JSON endpoints: validation, saving with revisions, publishing, rolling back,
diffs and test runs, all answered by the same domain code the engine and the API use."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.editor.conftest import JsonClient, url
from tests.factories import CHAIN, add_draft, make_workflow
from workflows import editing
from workflows.models import AuditEntry, NodeRun, Run, Workflow, WorkflowVersion

CYCLE: dict[str, Any] = {
    **CHAIN,
    "edges": [*CHAIN["edges"], {"source": "c", "target": "a"}],
}
CYCLE_PROBLEM = {
    "code": "cycle",
    "message": "cycle: a -> b -> c -> a",
    "node": None,
    "field": "edges",
    "cycle": ["a", "b", "c", "a"],
}


def with_node(definition: dict[str, Any], index: int, **fields: Any) -> dict[str, Any]:
    changed = copy.deepcopy(definition)
    changed["nodes"][index].update(fields)
    return changed


def test_validate_answers_structured_issues_with_json_paths(editor: JsonClient) -> None:
    make_workflow("paths")
    broken = with_node(CHAIN, 1, handler="core.nope")
    broken = with_node(broken, 2, config={"unexpected": 1}, retry={"max_attempts": 0})
    response = editor.post(url("paths", "api/validate"), {"definition": broken})
    assert response.status_code == 200
    body = response.json()
    paths = {issue["field"] for issue in body["issues"]}
    assert body["valid"] is False
    assert {"nodes[1].handler", "nodes[2].config", "nodes[2].retry.max_attempts"} <= paths
    unknown = next(i for i in body["issues"] if i["field"] == "nodes[1].handler")
    assert "unknown handler 'core.nope'" in unknown["message"]
    assert (unknown["code"], unknown["node"]) == ("unknown_handler", CHAIN["nodes"][1]["id"])


def test_validate_reports_a_cycle_with_its_node_ids(editor: JsonClient) -> None:
    make_workflow("cyclic")
    body = editor.post(url("cyclic", "api/validate"), {"definition": CYCLE}).json()
    assert body["issues"] == [CYCLE_PROBLEM]


def test_validate_accepts_a_valid_definition(editor: JsonClient) -> None:
    make_workflow("fine")
    assert editor.post(url("fine", "api/validate"), {"definition": CHAIN}).json() == {
        "valid": True,
        "issues": [],
    }


def test_validate_refuses_a_body_that_is_not_json(editor: JsonClient) -> None:
    make_workflow("garbled")
    response = editor.post(url("garbled", "api/validate"), raw="{not json")
    assert response.status_code == 422
    assert "not valid JSON" in response.json()["error"]


def test_saving_a_draft_bumps_its_revision(editor: JsonClient) -> None:
    workflow = make_workflow("drafting")
    add_draft(workflow, CHAIN)
    changed = with_node(CHAIN, 0, timeout_seconds=30)
    response = editor.post(
        url("drafting", "api/save"), {"base": 2, "revision": 1, "definition": changed, "comment": "faster"}
    )
    assert response.status_code == 200
    body = response.json()
    assert (body["number"], body["revision"], body["created"], body["comment"]) == (2, 2, False, "faster")
    assert body_version(workflow, 2).definition["nodes"][0]["timeout_seconds"] == 30
    assert AuditEntry.objects.filter(
        action="version.update", target_id=str(body_version(workflow, 2).pk)
    ).exists()


def body_version(workflow: Workflow, number: int) -> WorkflowVersion:
    return workflow.versions.get(number=number)


def test_a_stale_save_is_refused_with_the_current_revision(editor: JsonClient) -> None:
    workflow = make_workflow("stale")
    add_draft(workflow, CHAIN)
    first = with_node(CHAIN, 0, timeout_seconds=30)
    second = with_node(CHAIN, 0, timeout_seconds=99)
    assert (
        editor.post(url("stale", "api/save"), {"base": 2, "revision": 1, "definition": first}).status_code
        == 200
    )
    response = editor.post(url("stale", "api/save"), {"base": 2, "revision": 1, "definition": second})
    assert response.status_code == 412
    body = response.json()
    assert body["code"] == "stale_revision" and body["current_revision"] == 2
    assert "changed by someone else" in body["error"] and "reload" in body["error"]
    kept = body_version(workflow, 2)
    assert (kept.revision, kept.definition["nodes"][0]["timeout_seconds"]) == (2, 30)


def test_saving_on_a_published_version_starts_a_new_draft(editor: JsonClient) -> None:
    workflow = make_workflow("branching")
    changed = with_node(CHAIN, 1, join="all_done")
    response = editor.post(url("branching", "api/save"), {"base": 1, "revision": None, "definition": changed})
    assert response.status_code == 201
    assert (response.json()["number"], response.json()["status"], response.json()["created"]) == (
        2,
        "draft",
        True,
    )
    assert body_version(workflow, 1).definition["nodes"][1]["join"] == "all_success"  # immutable


def test_first_save_of_a_new_workflow_creates_version_one(editor: JsonClient) -> None:
    response = editor.client.post("/workflows/", {"slug": "fresh", "title": "Fresh"})
    assert response.status_code == 302 and response["Location"] == "/workflows/fresh/"
    saved = editor.post(url("fresh", "api/save"), {"base": None, "definition": CHAIN, "comment": "start"})
    assert saved.status_code == 201 and saved.json()["number"] == 1


def test_an_unknown_handler_is_refused_even_if_the_browser_sends_it(editor: JsonClient) -> None:
    workflow = make_workflow("guarded")
    add_draft(workflow, CHAIN)
    sneaky = with_node(CHAIN, 0, handler="os.system", config={"cmd": "rm -rf /"})
    for body in (
        {"base": 2, "revision": 1, "definition": sneaky},
        {"base": 1, "definition": sneaky},
    ):
        response = editor.post(url("guarded", "api/save"), body)
        assert response.status_code == 422
        assert response.json()["issues"][0]["field"] == "nodes[0].handler"
    assert workflow.versions.count() == 2
    assert body_version(workflow, 2).revision == 1


def test_an_invalid_definition_is_not_saved(editor: JsonClient) -> None:
    workflow = make_workflow("acyclic")
    add_draft(workflow, CHAIN)
    response = editor.post(url("acyclic", "api/save"), {"base": 2, "revision": 1, "definition": CYCLE})
    assert response.status_code == 422
    assert response.json()["issues"] == [CYCLE_PROBLEM]


def test_publish_makes_the_draft_active(editor: JsonClient) -> None:
    workflow = make_workflow("publishing")
    add_draft(workflow, with_node(CHAIN, 0, timeout_seconds=5))
    response = editor.post(url("publishing", "api/versions/2/publish"))
    assert response.status_code == 200
    assert (response.json()["status"], response.json()["is_active"]) == ("published", True)
    workflow.refresh_from_db()
    assert workflow.active_version.number == 2
    again = editor.post(url("publishing", "api/versions/2/publish"))
    assert again.status_code == 409 and "already published" in again.json()["error"]


def test_activate_rolls_back_to_an_older_version(editor: JsonClient) -> None:
    workflow = make_workflow("rollback")
    add_draft(workflow, with_node(CHAIN, 0, timeout_seconds=5))
    editor.post(url("rollback", "api/versions/2/publish"))
    response = editor.post(url("rollback", "api/versions/1/activate"))
    assert response.status_code == 200 and response.json()["is_active"] is True
    workflow.refresh_from_db()
    assert workflow.active_version.number == 1
    assert AuditEntry.objects.filter(action="version.activate").count() == 1


def test_a_draft_cannot_be_activated(editor: JsonClient) -> None:
    workflow = make_workflow("not-yet")
    add_draft(workflow, CHAIN)
    response = editor.post(url("not-yet", "api/versions/2/activate"))
    assert response.status_code == 409 and "publish it before activating" in response.json()["error"]


def test_history_lists_who_when_comment_and_status(editor: JsonClient) -> None:
    workflow = make_workflow("history")
    add_draft(workflow, CHAIN, comment="try this")
    versions = editor.get(url("history", "api/versions")).json()["versions"]
    assert [(v["number"], v["status"], v["is_active"], v["comment"]) for v in versions] == [
        (2, "draft", False, "try this"),
        (1, "published", True, "first"),
    ]
    assert set(versions[0]) >= {"created_by", "created_at", "revision", "checksum"}


def test_diff_lists_added_removed_and_changed(editor: JsonClient) -> None:
    workflow = make_workflow("diffing")
    changed = with_node(CHAIN, 1, timeout_seconds=9)
    changed["nodes"] = [n for n in changed["nodes"] if n["id"] != "c"] + [{"id": "d", "handler": "core.noop"}]
    changed["edges"] = [{"source": "a", "target": "b"}, {"source": "b", "target": "d"}]
    add_draft(workflow, changed)
    body = editor.get(url("diffing", "api/diff"), **{"from": 1, "to": 2}).json()
    diff = body["diff"]
    assert (diff["nodes_added"], diff["nodes_removed"]) == (["d"], ["c"])
    assert diff["nodes_changed"] == [
        {"node_id": "b", "changes": [{"field": "timeout_seconds", "old": 300.0, "new": 9.0}]}
    ]
    assert diff["edges_added"] == [{"source": "b", "target": "d"}]
    assert diff["edges_removed"] == [{"source": "b", "target": "c"}]
    assert (body["old"]["number"], body["new"]["number"]) == (1, 2)


def test_unknown_workflow_or_version_is_404_json(editor: JsonClient) -> None:
    make_workflow("known")
    assert editor.get(url("ghost", "api/versions")).status_code == 404
    missing = editor.get(url("known", "api/versions/7"))
    assert missing.status_code == 404 and "no version 7" in missing.json()["error"]
    assert editor.get(url("ghost")).status_code == 404


@pytest.mark.usefixtures("lone_starts")
def test_test_run_of_the_active_version_is_pinned_to_it(editor: JsonClient) -> None:
    workflow = make_workflow("trial")
    response = editor.post(url("trial", "api/test-runs"), {"version": 1, "input": {"user_id": "u-7"}})
    assert response.status_code == 201
    state = response.json()
    run = Run.objects.get(pk=state["id"])
    assert (run.version.number, run.input) == (1, {"user_id": "u-7"})
    assert set(state["nodes"]) == {"a", "b", "c"}
    assert {n: node["status"] for n, node in state["nodes"].items()} == {
        "a": "queued",
        "b": "pending",
        "c": "pending",
    }
    assert state["finished"] is False and workflow.runs.count() == 1


def test_test_run_of_a_draft_runs_a_frozen_snapshot_and_leaves_the_active_version(editor: JsonClient) -> None:
    workflow = make_workflow("frozen")
    draft = add_draft(workflow, with_node(CHAIN, 0, timeout_seconds=7))
    first = editor.post(url("frozen", "api/test-runs"), {"version": 2, "input": {}}).json()
    second = editor.post(url("frozen", "api/test-runs"), {"version": 2, "input": {}}).json()
    snapshot = body_version(workflow, 3)
    assert (first["version"], second["version"]) == (3, 3)  # reused while the draft is unchanged
    assert snapshot.status == "published" and snapshot.checksum == draft.checksum
    assert snapshot.comment.startswith(editing.SNAPSHOT_PREFIX)
    workflow.refresh_from_db()
    assert workflow.active_version.number == 1
    assert body_version(workflow, 2).status == "draft"
    history = editor.get(url("frozen", "api/versions")).json()["versions"]
    assert history[0]["is_snapshot"] is True


def test_test_run_input_must_be_an_object(editor: JsonClient) -> None:
    make_workflow("inputs")
    response = editor.post(url("inputs", "api/test-runs"), {"version": 1, "input": [1, 2]})
    assert response.status_code == 422 and "input must be a JSON object" in response.json()["error"]


@pytest.mark.usefixtures("lone_starts")
def test_run_state_shows_node_statuses_errors_and_outputs(editor: JsonClient) -> None:
    make_workflow("watched")
    run_id = editor.post(url("watched", "api/test-runs"), {"version": 1, "input": {}}).json()["id"]
    NodeRun.objects.filter(run_id=run_id, node_id="a").update(status="succeeded", output={"ok": True})
    NodeRun.objects.filter(run_id=run_id, node_id="b").update(status="dead", error="boom", attempt=2)
    state = editor.get(url("watched", f"api/runs/{run_id}")).json()
    assert state["nodes"]["a"] == {"status": "succeeded", "attempt": 1, "error": "", "output": '{"ok":true}'}
    assert state["nodes"]["b"]["error"] == "boom" and state["nodes"]["b"]["attempt"] == 2
    other = make_workflow("elsewhere")
    assert editor.get(url(other.slug, f"api/runs/{run_id}")).status_code == 404


def test_creating_a_workflow_with_a_taken_or_bad_slug_says_why(editor: JsonClient) -> None:
    make_workflow("taken")
    taken = editor.client.post("/workflows/", {"slug": "taken", "title": "Again"})
    assert taken.status_code == 400 and "already exists" in taken.content.decode()
    bad = editor.client.post("/workflows/", {"slug": "no spaces!", "title": "Bad"})
    assert bad.status_code == 400 and Workflow.objects.count() == 1
