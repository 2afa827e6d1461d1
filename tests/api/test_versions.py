"""Versions through the API: drafts, validation, ETags, publish, rollback, diff, handlers."""

from __future__ import annotations

import pytest

from tests.api.conftest import assert_problem
from workflows.store.models import AuditEntry, WorkflowVersion

pytestmark = pytest.mark.django_db

ONE = {"nodes": [{"id": "a", "handler": "core.noop"}]}
TWO = {
    "nodes": [{"id": "a", "handler": "core.noop"}, {"id": "b", "handler": "core.echo"}],
    "edges": [{"source": "a", "target": "b"}],
}


def draft(api, definition=ONE, slug="chain"):
    response = api.post(f"workflows/{slug}/versions", {"definition": definition, "comment": "t"})
    assert response.status_code == 201, response.content
    return response


def test_an_invalid_draft_reports_every_field_and_is_not_saved(api, chain) -> None:
    definition = {
        "nodes": [{"id": "a", "handler": "core.noop"}, {"id": "b", "handler": "os.system"}],
        "edges": [{"source": "a", "target": "zzz"}],
    }
    body = assert_problem(api.post("workflows/chain/versions", {"definition": definition}), 422)
    assert {e["path"] for e in body["errors"]} == {
        "definition.nodes[1].handler",
        "definition.edges[0].target",
    }
    assert all(e["in"] == "body" for e in body["errors"])
    assert WorkflowVersion.objects.filter(workflow=chain).count() == 1


def test_validate_returns_every_issue_without_saving(api, chain) -> None:
    response = api.post("definitions/validate", {"definition": {"nodes": [{"id": "1bad", "handler": "x"}]}})
    assert response.status_code == 200
    result = response.json()
    assert result["valid"] is False
    assert {i["path"] for i in result["issues"]} == {"nodes[0].id", "nodes[0].handler"}
    assert api.post("definitions/validate", {"definition": ONE}).json() == {"valid": True, "issues": []}
    assert WorkflowVersion.objects.filter(workflow=chain).count() == 1


def test_a_draft_carries_an_etag_and_updates_with_if_match(api, chain) -> None:
    created = draft(api)
    etag, number = created["ETag"], created.json()["number"]
    assert created.json()["etag"] == etag and created.json()["status"] == "draft"
    assert api.get(f"workflows/chain/versions/{number}")["ETag"] == etag
    updated = api.put(f"workflows/chain/versions/{number}", {"definition": TWO}, headers={"If-Match": etag})
    assert updated.status_code == 200 and updated["ETag"] != etag
    assert [n["id"] for n in updated.json()["definition"]["nodes"]] == ["a", "b"]
    assert AuditEntry.objects.filter(action="version.update").exists()


def test_a_stale_etag_gets_412_with_the_current_version(api, chain) -> None:
    created = draft(api)
    etag, number = created["ETag"], created.json()["number"]
    api.put(f"workflows/chain/versions/{number}", {"definition": TWO}, headers={"If-Match": etag})
    stale = api.put(f"workflows/chain/versions/{number}", {"definition": ONE}, headers={"If-Match": etag})
    body = assert_problem(stale, 412)
    assert body["current"]["revision"] == 2 and len(body["current"]["definition"]["nodes"]) == 2
    assert stale["ETag"] == body["current"]["etag"]
    other = api.put(f"workflows/chain/versions/{number}", {"definition": ONE}, headers={"If-Match": '"1-1"'})
    assert_problem(other, 412)
    assert len(WorkflowVersion.objects.get(workflow=chain, number=number).definition["nodes"]) == 2


def test_if_match_is_required_and_checked(api, chain) -> None:
    number = draft(api).json()["number"]
    assert_problem(api.put(f"workflows/chain/versions/{number}", {"definition": ONE}), 428, "If-Match")
    bad = api.put(
        f"workflows/chain/versions/{number}", {"definition": ONE}, headers={"If-Match": "yesterday"}
    )
    assert_problem(bad, 400, "If-Match")
    star = api.put(f"workflows/chain/versions/{number}", {"definition": TWO}, headers={"If-Match": "*"})
    assert star.status_code == 200


def test_publish_activate_and_roll_back(api, chain) -> None:
    number = draft(api).json()["number"]
    published = api.post(f"workflows/chain/versions/{number}/publish", {})
    assert published.json()["status"] == "published" and published.json()["active"] is True
    assert_problem(api.post(f"workflows/chain/versions/{number}/publish", {}), 409)
    edit = api.put(f"workflows/chain/versions/{number}", {"definition": TWO}, headers={"If-Match": "*"})
    assert "immutable" in assert_problem(edit, 409)["detail"]
    rolled_back = api.post("workflows/chain/versions/1/activate")
    assert rolled_back.json()["active"] is True
    assert api.get("workflows/chain").json()["active_version"] == 1
    versions = api.get("workflows/chain/versions").json()["items"]
    assert [(v["number"], v["active"]) for v in versions] == [(2, False), (1, True)]
    unpublished = draft(api).json()["number"]
    assert_problem(api.post(f"workflows/chain/versions/{unpublished}/activate"), 409)
    actions = set(AuditEntry.objects.values_list("action", flat=True))
    assert {"version.create", "version.publish", "version.activate"} <= actions


def test_publish_without_activating(api, chain) -> None:
    number = draft(api).json()["number"]
    response = api.post(f"workflows/chain/versions/{number}/publish", {"activate": False})
    assert response.json()["active"] is False and api.get("workflows/chain").json()["active_version"] == 1


def test_diff_lists_nodes_edges_and_fields(api, chain) -> None:
    changed = {
        "nodes": [
            {"id": "first", "handler": "core.noop", "retry": {"max_attempts": 3}},
            {"id": "third", "handler": "core.noop"},
        ],
        "edges": [{"source": "first", "target": "third"}],
    }
    number = draft(api, changed).json()["number"]
    diff = api.get("workflows/chain/diff", **{"from": 1, "to": number}).json()
    assert diff["empty"] is False
    d = diff["diff"]
    assert d["nodes_added"] == ["third"] and d["nodes_removed"] == ["second"]
    assert d["nodes_changed"] == [
        {"node_id": "first", "changes": [{"field": "retry.max_attempts", "old": 1, "new": 3}]}
    ]
    assert d["edges_added"] == [{"source": "first", "target": "third"}]
    assert api.get("workflows/chain/diff", **{"from": 1, "to": 1}).json()["empty"] is True
    assert_problem(api.get("workflows/chain/diff", **{"from": 1}), 400, "to")
    assert_problem(api.get("workflows/chain/diff", **{"from": 1, "to": 77}), 404)


def test_unknown_version_and_workflow(api, chain) -> None:
    assert "no version 9" in assert_problem(api.get("workflows/chain/versions/9"), 404)["detail"]
    assert "nope" in assert_problem(api.get("workflows/nope/versions/1"), 404)["detail"]


def test_handlers_are_listed_with_docs_and_schemas(api) -> None:
    items = {h["name"]: h for h in api.get("handlers").json()["items"]}
    assert "core.noop" in items and "http.request" in items
    assert items["http.request"]["config_schema"]["type"] == "object"
    assert items["core.noop"]["summary"]
