"""Workflows through the API: list, create, read, update, delete, pause, resume, export, import."""

from __future__ import annotations

import pytest

from tests.api.conftest import CHAIN, assert_problem
from workflows.store.models import AuditEntry, Run, Workflow

pytestmark = pytest.mark.django_db


def test_create_read_update_a_workflow(api) -> None:
    response = api.post("workflows", {"slug": "orders", "title": "Orders"})
    assert response.status_code == 201 and response["Location"] == "/api/v1/workflows/orders"
    assert response.json()["active_version"] is None
    patched = api.patch("workflows/orders", {"description": "Handle orders", "title": None})
    assert patched.json()["description"] == "Handle orders" and patched.json()["title"] == "Orders"
    assert api.get("workflows/orders").json()["description"] == "Handle orders"
    actions = list(AuditEntry.objects.filter(target_type="workflow").values_list("action", flat=True))
    assert sorted(actions) == ["workflow.create", "workflow.update"]


def test_a_duplicate_slug_is_a_conflict_and_a_bad_slug_names_the_field(api) -> None:
    api.post("workflows", {"slug": "orders", "title": "Orders"})
    assert_problem(api.post("workflows", {"slug": "orders", "title": "Again"}), 409)
    assert_problem(api.post("workflows", {"slug": "no spaces", "title": "x"}), 422, "slug")
    assert_problem(api.post("workflows", {"title": "x"}), 422, "slug")
    assert_problem(api.post("workflows", {"slug": "ok", "title": 5}), 422, "title")
    assert_problem(api.post("workflows", {"slug": "ok", "title": "x", "colour": "red"}), 422, "colour")
    assert not Workflow.objects.exclude(slug="orders").exists()


def test_listing_pages_with_a_cursor_and_filters(api) -> None:
    for n in range(5):
        api.post("workflows", {"slug": f"wf-{n}", "title": f"Flow {n}"})
    api.post("workflows/wf-3/pause")
    first = api.get("workflows", limit=2).json()
    second = api.get("workflows", limit=2, cursor=first["next_cursor"]).json()
    third = api.get("workflows", limit=2, cursor=second["next_cursor"]).json()
    slugs = [w["slug"] for page in (first, second, third) for w in page["items"]]
    assert slugs == [f"wf-{n}" for n in range(5)] and third["next_cursor"] is None
    assert [w["slug"] for w in api.get("workflows", q="FLOW 2").json()["items"]] == ["wf-2"]
    assert [w["slug"] for w in api.get("workflows", paused="true").json()["items"]] == ["wf-3"]
    assert_problem(api.get("workflows", cursor="garbage"), 400, "cursor")
    assert_problem(api.get("workflows", limit=0), 400, "limit")
    assert_problem(api.get("workflows", colour="red"), 400, "colour")


def test_an_unknown_workflow_is_a_404_problem(api) -> None:
    body = assert_problem(api.get("workflows/nope"), 404)
    assert "nope" in body["detail"]


def test_delete_is_refused_while_runs_are_in_flight(api, chain) -> None:
    run = api.post("workflows/chain/runs", {}).json()
    body = assert_problem(api.delete("workflows/chain"), 409)
    assert "in flight" in body["detail"]
    api.post(f"runs/{run['id']}/cancel", {})
    assert api.delete("workflows/chain").status_code == 204
    assert not Workflow.objects.filter(slug="chain").exists() and not Run.objects.exists()
    assert AuditEntry.objects.filter(action="workflow.delete").exists()


def test_pause_holds_new_runs_and_resume_starts_them(api, chain) -> None:
    assert api.post("workflows/chain/pause").json()["paused"] is True
    run = api.post("workflows/chain/runs", {}).json()
    assert run["status"] == "waiting"
    resumed = api.post("workflows/chain/resume").json()
    assert resumed == {**resumed, "started": 1} and resumed["workflow"]["paused"] is False
    assert api.get(f"runs/{run['id']}").json()["status"] == "running"


def test_export_then_import_round_trips(api, chain) -> None:
    exported = api.get("workflows/chain/export").json()
    assert exported["format"] == "switchyard.workflow/v1" and exported["version"] == 1
    imported = api.post("workflow-imports", {**exported, "slug": "chain-copy"}, publish="true")
    assert imported.status_code == 201
    assert imported.json()["status"] == "published" and imported.json()["active"] is True
    assert api.get("workflows/chain-copy").json()["active_version"] == 1
    assert api.get("workflows/chain-copy/export").json()["checksum"] == exported["checksum"]
    assert_problem(api.get("workflows/chain/export", version=9), 404)


def test_an_invalid_import_names_the_definition_field_and_writes_nothing(api) -> None:
    bad = {"format": "switchyard.workflow/v1", "slug": "bad", "title": "Bad", "definition": {"nodes": []}}
    assert_problem(api.post("workflow-imports", bad), 422, "definition.nodes")
    assert not Workflow.objects.filter(slug="bad").exists()
    assert_problem(api.post("workflow-imports", {**bad, "format": "other"}), 422, "format")


def test_chain_fixture_is_what_the_tests_expect(chain) -> None:
    assert chain.active_version.definition["edges"][0]["source"] == CHAIN["edges"][0]["source"]
