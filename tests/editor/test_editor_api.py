"""What the editor asks of /api/v1 with its session: validation with structured problems,
saving with ETags, publishing, rolling back, diffs and test runs, all answered by the same
domain code the engine and every other API client use, refusals as problem documents."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.editor.conftest import JsonClient, api, if_match
from tests.factories import CHAIN, add_draft, make_workflow
from workflows.store.models import AuditEntry, NodeRun, Run, Workflow, WorkflowVersion
from workflows.versions import editing

PROBLEM = "application/problem+json"
CYCLE: dict[str, Any] = {
    **CHAIN,
    "edges": [*CHAIN["edges"], {"source": "c", "target": "a"}],
}
CYCLE_PROBLEM = {
    "in": "body",
    "path": "definition.edges",
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


def problem(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == PROBLEM
    return response.json()


def test_validate_answers_structured_issues_with_json_paths(editor: JsonClient) -> None:
    make_workflow("paths")
    broken = with_node(CHAIN, 1, handler="core.nope")
    broken = with_node(broken, 2, config={"unexpected": 1}, retry={"max_attempts": 0})
    response = editor.post(api("paths", "validate"), {"definition": broken})
    assert response.status_code == 200
    body = response.json()
    fields = {issue["field"] for issue in body["errors"]}
    assert body["valid"] is False
    assert {"nodes[1].handler", "nodes[2].config", "nodes[2].retry.max_attempts"} <= fields
    unknown = next(i for i in body["errors"] if i["field"] == "nodes[1].handler")
    assert "unknown handler 'core.nope'" in unknown["message"]
    assert (unknown["code"], unknown["node"]) == ("unknown_handler", CHAIN["nodes"][1]["id"])
    assert (unknown["in"], unknown["path"]) == ("body", "definition.nodes[1].handler")


def test_validate_reports_a_cycle_with_its_node_ids(editor: JsonClient) -> None:
    make_workflow("cyclic")
    body = editor.post(api("cyclic", "validate"), {"definition": CYCLE}).json()
    assert body["errors"] == [CYCLE_PROBLEM]


def test_validate_accepts_a_valid_definition(editor: JsonClient) -> None:
    make_workflow("fine")
    assert editor.post(api("fine", "validate"), {"definition": CHAIN}).json() == {
        "valid": True,
        "errors": [],
        "warnings": [],
    }


def test_validate_warns_of_a_placeholder_no_upstream_node_provides(editor: JsonClient) -> None:
    make_workflow("gapped")
    definition = {
        "nodes": [
            {"id": "a", "handler": "core.noop"},
            {"id": "b", "handler": "core.fail", "config": {"message": "{upstream.c.x}"}},
            {"id": "c", "handler": "core.noop"},
        ],
        "edges": [{"source": "a", "target": "b"}],
    }
    body = editor.post(api("gapped", "validate"), {"definition": definition}).json()
    assert body["valid"] is True  # a warning refuses nothing
    (warning,) = body["warnings"]
    assert (warning["code"], warning["node"], warning["path"]) == (
        "upstream_not_predecessor",
        "b",
        "definition.nodes[1].config.message",
    )


def test_validate_refuses_a_body_that_is_not_json(editor: JsonClient) -> None:
    make_workflow("garbled")
    body = problem(editor.post(api("garbled", "validate"), raw="{not json"), 400)
    assert "not valid JSON" in body["detail"]


def test_saving_a_draft_bumps_its_revision(editor: JsonClient) -> None:
    workflow = make_workflow("drafting")
    add_draft(workflow, CHAIN)
    changed = with_node(CHAIN, 0, timeout_seconds=30)
    headers = if_match(editor, "drafting", 2)
    response = editor.put(
        api("drafting", "versions/2"), {"definition": changed, "comment": "faster"}, **headers
    )
    assert response.status_code == 200
    body = response.json()
    assert (body["number"], body["revision"], body["comment"]) == (2, 2, "faster")
    assert response["ETag"] == body["etag"] != headers["If-Match"]
    assert stored(workflow, 2).definition["nodes"][0]["timeout_seconds"] == 30
    assert AuditEntry.objects.filter(action="version.update", target_id=str(stored(workflow, 2).pk)).exists()


def stored(workflow: Workflow, number: int) -> WorkflowVersion:
    return workflow.versions.get(number=number)


def test_a_stale_save_is_refused_with_the_current_revision(editor: JsonClient) -> None:
    workflow = make_workflow("stale")
    add_draft(workflow, CHAIN)
    headers = if_match(editor, "stale", 2)  # both saves start from revision 1
    first = with_node(CHAIN, 0, timeout_seconds=30)
    second = with_node(CHAIN, 0, timeout_seconds=99)
    assert editor.put(api("stale", "versions/2"), {"definition": first}, **headers).status_code == 200
    response = editor.put(api("stale", "versions/2"), {"definition": second}, **headers)
    body = problem(response, 412)
    assert body["current"]["revision"] == 2 and response["ETag"] == body["current"]["etag"]
    assert "changed by someone else (now revision 2)" in body["detail"] and "reload" in body["detail"]
    kept = stored(workflow, 2)
    assert (kept.revision, kept.definition["nodes"][0]["timeout_seconds"]) == (2, 30)


def test_saving_on_a_published_version_starts_a_new_draft(editor: JsonClient) -> None:
    workflow = make_workflow("branching")
    changed = with_node(CHAIN, 1, join="all_done")
    response = editor.post(api("branching", "versions"), {"definition": changed})
    assert response.status_code == 201
    assert (response.json()["number"], response.json()["status"]) == (2, "draft")
    refused = editor.put(
        api("branching", "versions/1"), {"definition": changed}, **if_match(editor, "branching", 1)
    )
    assert "published and immutable" in problem(refused, 409)["detail"]
    assert stored(workflow, 1).definition["nodes"][1]["join"] == "all_success"  # immutable


def test_first_save_of_a_new_workflow_creates_version_one(editor: JsonClient) -> None:
    response = editor.client.post("/workflows/", {"slug": "fresh", "title": "Fresh"})
    assert response.status_code == 302 and response["Location"] == "/workflows/fresh/"
    saved = editor.post(api("fresh", "versions"), {"definition": CHAIN, "comment": "start"})
    assert saved.status_code == 201 and saved.json()["number"] == 1


def test_an_unknown_handler_is_refused_even_if_the_browser_sends_it(editor: JsonClient) -> None:
    workflow = make_workflow("guarded")
    add_draft(workflow, CHAIN)
    sneaky = with_node(CHAIN, 0, handler="os.system", config={"cmd": "rm -rf /"})
    for response in (
        editor.put(api("guarded", "versions/2"), {"definition": sneaky}, **if_match(editor, "guarded", 2)),
        editor.post(api("guarded", "versions"), {"definition": sneaky}),
    ):
        error = problem(response, 422)["errors"][0]
        assert (error["field"], error["code"], error["node"]) == ("nodes[0].handler", "unknown_handler", "a")
    assert workflow.versions.count() == 2
    assert stored(workflow, 2).revision == 1


def test_an_invalid_definition_is_not_saved(editor: JsonClient) -> None:
    workflow = make_workflow("acyclic")
    add_draft(workflow, CHAIN)
    response = editor.put(
        api("acyclic", "versions/2"), {"definition": CYCLE}, **if_match(editor, "acyclic", 2)
    )
    assert problem(response, 422)["errors"] == [CYCLE_PROBLEM]
    assert stored(workflow, 2).revision == 1


def test_publish_makes_the_draft_active(editor: JsonClient) -> None:
    workflow = make_workflow("publishing")
    add_draft(workflow, with_node(CHAIN, 0, timeout_seconds=5))
    response = editor.post(api("publishing", "versions/2/publish"))
    assert response.status_code == 200
    assert (response.json()["status"], response.json()["active"]) == ("published", True)
    workflow.refresh_from_db()
    assert workflow.active_version.number == 2
    again = editor.post(api("publishing", "versions/2/publish"))
    assert "already published" in problem(again, 409)["detail"]


def test_activate_rolls_back_to_an_older_version(editor: JsonClient) -> None:
    workflow = make_workflow("rollback")
    add_draft(workflow, with_node(CHAIN, 0, timeout_seconds=5))
    editor.post(api("rollback", "versions/2/publish"))
    response = editor.post(api("rollback", "versions/1/activate"))
    assert response.status_code == 200 and response.json()["active"] is True
    workflow.refresh_from_db()
    assert workflow.active_version.number == 1
    assert AuditEntry.objects.filter(action="version.activate").count() == 1


def test_a_draft_cannot_be_activated(editor: JsonClient) -> None:
    workflow = make_workflow("not-yet")
    add_draft(workflow, CHAIN)
    response = editor.post(api("not-yet", "versions/2/activate"))
    assert "publish it before activating" in problem(response, 409)["detail"]


def test_history_lists_who_when_comment_and_status(editor: JsonClient) -> None:
    workflow = make_workflow("history")
    add_draft(workflow, CHAIN, comment="try this")
    versions = editor.get(api("history", "versions")).json()["items"]
    assert [(v["number"], v["status"], v["active"], v["comment"], v["nodes"]) for v in versions] == [
        (2, "draft", False, "try this", 3),
        (1, "published", True, "first", 3),
    ]
    assert set(versions[0]) >= {"created_by", "created_at", "revision", "checksum", "etag", "test_snapshot"}


def test_diff_lists_added_removed_and_changed(editor: JsonClient) -> None:
    workflow = make_workflow("diffing")
    changed = with_node(CHAIN, 1, timeout_seconds=9)
    changed["nodes"] = [n for n in changed["nodes"] if n["id"] != "c"] + [{"id": "d", "handler": "core.noop"}]
    changed["edges"] = [{"source": "a", "target": "b"}, {"source": "b", "target": "d"}]
    add_draft(workflow, changed)
    body = editor.get(api("diffing", "diff"), **{"from": 1, "to": 2}).json()
    diff = body["diff"]
    assert (diff["nodes_added"], diff["nodes_removed"]) == (["d"], ["c"])
    assert diff["nodes_changed"] == [
        {"node_id": "b", "changes": [{"field": "timeout_seconds", "old": 300.0, "new": 9.0}]}
    ]
    assert diff["edges_added"] == [{"source": "b", "target": "d"}]
    assert diff["edges_removed"] == [{"source": "b", "target": "c"}]
    assert (body["from_version"], body["to_version"]) == (1, 2)


def test_unknown_workflow_or_version_is_a_404_problem(editor: JsonClient) -> None:
    make_workflow("known")
    problem(editor.get(api("ghost", "versions")), 404)
    assert "no version 7" in problem(editor.get(api("known", "versions/7")), 404)["detail"]
    problem(editor.post(api("ghost", "validate"), {"definition": CHAIN}), 404)
    problem(editor.post(api("known", "versions/7/test-runs")), 404)


def test_the_editors_own_json_endpoints_are_gone(editor: JsonClient) -> None:
    make_workflow("moved")
    for tail in ("api/versions", "api/versions/1", "api/diff?from=1&to=1", "api/runs/1"):
        assert editor.get(f"/workflows/moved/{tail}").status_code == 404
    for tail in ("api/validate", "api/save", "api/test-runs", "api/versions/1/publish"):
        assert editor.post(f"/workflows/moved/{tail}", {}).status_code == 404


@pytest.mark.usefixtures("lone_starts")
def test_test_run_of_the_active_version_is_pinned_to_it(editor: JsonClient) -> None:
    workflow = make_workflow("trial")
    response = editor.post(api("trial", "versions/1/test-runs"), {"input": {"user_id": "u-7"}})
    assert response.status_code == 201
    state = response.json()
    assert response["Location"] == f"/api/v1/runs/{state['id']}"
    run = Run.objects.get(pk=state["id"])
    assert (run.version.number, run.input) == (1, {"user_id": "u-7"})
    assert {n["node_id"]: n["status"] for n in state["nodes"]} == {
        "a": "queued",
        "b": "pending",
        "c": "pending",
    }
    assert state["status"] == "running" and workflow.runs.count() == 1
    assert AuditEntry.objects.filter(action="run.test_start", target_id=str(run.pk)).exists()


def test_test_run_of_a_draft_runs_a_frozen_snapshot_and_leaves_the_active_version(editor: JsonClient) -> None:
    workflow = make_workflow("frozen")
    draft = add_draft(workflow, with_node(CHAIN, 0, timeout_seconds=7))
    first = editor.post(api("frozen", "versions/2/test-runs"), {"input": {}}).json()
    second = editor.post(api("frozen", "versions/2/test-runs")).json()  # no body: input {}
    snapshot = stored(workflow, 3)
    assert (first["version"], second["version"]) == (3, 3)  # reused while the draft is unchanged
    assert snapshot.status == "published" and snapshot.checksum == draft.checksum
    assert snapshot.comment.startswith(editing.SNAPSHOT_PREFIX)
    workflow.refresh_from_db()
    assert workflow.active_version.number == 1
    assert stored(workflow, 2).status == "draft"
    history = editor.get(api("frozen", "versions")).json()["items"]
    assert [v["test_snapshot"] for v in history] == [True, False, False]


def test_test_run_input_must_be_an_object(editor: JsonClient) -> None:
    make_workflow("inputs")
    response = editor.post(api("inputs", "versions/1/test-runs"), {"input": [1, 2]})
    assert [e["path"] for e in problem(response, 422)["errors"]] == ["input"]
    assert Run.objects.count() == 0


@pytest.mark.usefixtures("lone_starts")
def test_run_state_shows_node_statuses_errors_and_outputs(editor: JsonClient) -> None:
    make_workflow("watched")
    run_id = editor.post(api("watched", "versions/1/test-runs"), {"input": {}}).json()["id"]
    NodeRun.objects.filter(run_id=run_id, node_id="a").update(status="succeeded", output={"ok": True})
    NodeRun.objects.filter(run_id=run_id, node_id="b").update(status="dead", error="boom", attempt=2)
    state = editor.get(f"/api/v1/runs/{run_id}").json()
    nodes = {n["node_id"]: n for n in state["nodes"]}
    assert (nodes["a"]["status"], nodes["a"]["attempt"], nodes["a"]["error"]) == ("succeeded", 1, "")
    assert nodes["a"]["output"] == {"ok": True}
    assert (nodes["b"]["status"], nodes["b"]["error"], nodes["b"]["attempt"]) == ("dead", "boom", 2)


def test_creating_a_workflow_with_a_taken_or_bad_slug_says_why(editor: JsonClient) -> None:
    make_workflow("taken")
    taken = editor.client.post("/workflows/", {"slug": "taken", "title": "Again"})
    assert taken.status_code == 400 and "already exists" in taken.content.decode()
    bad = editor.client.post("/workflows/", {"slug": "no spaces!", "title": "Bad"})
    assert bad.status_code == 400 and Workflow.objects.count() == 1
