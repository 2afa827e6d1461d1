"""Who may do what in the editor, on its pages and in the API calls it makes: the permission
matrix, CSRF, and role-aware pages."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth.models import Group, Permission, User
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder
from django.test import Client

from controlplane import access
from tests.editor.conftest import ROLES_AND_NOBODY, JsonClient, api, url
from tests.factories import CHAIN, add_draft, make_workflow
from workflows.runs import actions as runs
from workflows.store.models import Workflow
from workflows.versions import drafts

CHANGED = {**CHAIN, "description": "changed"}


@dataclass(frozen=True)
class Action:
    name: str
    least: str  # the least role allowed
    ok: int  # the status when allowed
    page: bool  # HTML page: anonymous is redirected to the login, not answered 401
    call: Callable[[JsonClient, dict[str, Any]], Any]


def setup() -> dict[str, Any]:
    """A workflow with v1 published and active, v2 a draft, and one run of v1."""
    workflow = make_workflow("matrix")
    add_draft(workflow, CHANGED)
    run, _ = runs.start_run(workflow, {})
    etag = drafts.etag(workflow.versions.get(number=2))
    return {"slug": workflow.slug, "run": run.pk, "etag": etag}


ACTIONS = [
    Action("list page", access.VIEWER, 200, True, lambda c, s: c.get("/workflows/")),
    Action("editor page", access.VIEWER, 200, True, lambda c, s: c.get(url(s["slug"]))),
    Action("history page", access.VIEWER, 200, True, lambda c, s: c.get(url(s["slug"], "history/"))),
    Action("diff page", access.VIEWER, 200, True, lambda c, s: c.get(url(s["slug"], "diff/"))),
    Action("list versions", access.VIEWER, 200, False, lambda c, s: c.get(api(s["slug"], "versions"))),
    Action("read version", access.VIEWER, 200, False, lambda c, s: c.get(api(s["slug"], "versions/2"))),
    Action(
        "diff", access.VIEWER, 200, False, lambda c, s: c.get(api(s["slug"], "diff"), **{"from": 1, "to": 2})
    ),
    Action(
        "validate",
        access.VIEWER,
        200,
        False,
        lambda c, s: c.post(api(s["slug"], "validate"), {"definition": CHAIN}),
    ),
    Action("run state", access.VIEWER, 200, False, lambda c, s: c.get(f"/api/v1/runs/{s['run']}")),
    Action(
        "test-run active",
        access.OPERATOR,
        201,
        False,
        lambda c, s: c.post(api(s["slug"], "versions/1/test-runs"), {"input": {}}),
    ),
    Action(
        "test-run draft",
        access.EDITOR,
        201,
        False,
        lambda c, s: c.post(api(s["slug"], "versions/2/test-runs"), {"input": {}}),
    ),
    Action(
        "save draft",
        access.EDITOR,
        200,
        False,
        lambda c, s: c.put(api(s["slug"], "versions/2"), {"definition": CHAIN}, **{"If-Match": s["etag"]}),
    ),
    Action(
        "save new draft",
        access.EDITOR,
        201,
        False,
        lambda c, s: c.post(api(s["slug"], "versions"), {"definition": CHAIN}),
    ),
    Action("publish", access.EDITOR, 200, False, lambda c, s: c.post(api(s["slug"], "versions/2/publish"))),
    Action("activate", access.EDITOR, 200, False, lambda c, s: c.post(api(s["slug"], "versions/1/activate"))),
    Action(
        "create workflow",
        access.EDITOR,
        302,
        True,
        lambda c, s: c.client.post("/workflows/", {"slug": "brand-new", "title": "Brand new"}),
    ),
]


def expected(action: Action, role: str) -> int:
    if role == "anonymous":
        return 302 if action.page else 401
    if role == "norole" or access.ROLES.index(role) < access.ROLES.index(action.least):
        return 403
    return action.ok


@pytest.mark.parametrize("role", ROLES_AND_NOBODY)
@pytest.mark.parametrize("action", ACTIONS, ids=lambda a: a.name)
def test_permission_matrix(action: Action, role: str, client_as: Callable[[str], JsonClient]) -> None:
    state = setup()
    response = action.call(client_as(role), state)
    assert response.status_code == expected(action, role), response.content[:300]
    if response.status_code in (401, 403) and not action.page:
        assert response["Content-Type"] == "application/problem+json"
        assert response.json()["detail"]


def test_refused_changes_leave_nothing_behind(client_as: Callable[[str], JsonClient]) -> None:
    state = setup()
    viewer = client_as(access.VIEWER)
    viewer.put(api(state["slug"], "versions/2"), {"definition": CHAIN}, **{"If-Match": state["etag"]})
    viewer.post(api(state["slug"], "versions/2/publish"))
    viewer.post(api(state["slug"], "versions/2/test-runs"), {"input": {}})
    workflow = Workflow.objects.get(slug=state["slug"])
    draft = workflow.versions.get(number=2)
    assert (draft.status, draft.revision, workflow.active_version.number) == ("draft", 1, 1)
    assert workflow.versions.count() == 2 and workflow.runs.count() == 1  # no snapshot, no run


def test_viewer_page_has_no_save_or_publish_buttons(client_as: Callable[[str], JsonClient]) -> None:
    state = setup()
    page = client_as(access.VIEWER).get(url(state["slug"])).content.decode()
    assert 'data-cmd="save"' not in page and 'data-cmd="publish"' not in page
    assert 'id="ed-palette-list"' not in page
    assert "Read only" in page


def test_editor_page_has_save_and_publish_buttons(editor: JsonClient) -> None:
    state = setup()
    page = editor.get(url(state["slug"])).content.decode()
    assert 'data-cmd="save"' in page and 'data-cmd="publish"' in page
    config = json.loads(page.split('id="editor-config" type="application/json">')[1].split("</script>")[0])
    assert config["can"] == {"edit": True, "publish": True, "run": True, "runSuite": True}
    assert config["version"] == 2  # the newest draft, newer than the active version


def test_operator_page_offers_test_runs_but_no_editing(client_as: Callable[[str], JsonClient]) -> None:
    state = setup()
    page = client_as(access.OPERATOR).get(url(state["slug"])).content.decode()
    config = json.loads(page.split('id="editor-config" type="application/json">')[1].split("</script>")[0])
    assert config["can"] == {"edit": False, "publish": False, "run": True, "runSuite": True}
    assert 'data-cmd="save"' not in page


def test_posts_without_the_csrf_token_are_refused(db: None) -> None:
    state = setup()
    user = User.objects.create(username="csrf-editor")
    user.groups.add(Group.objects.get_or_create(name=access.EDITOR)[0])
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    body = json.dumps({"definition": CHAIN})
    save_url = api(state["slug"], "versions/2")
    refused = client.put(save_url, body, content_type="application/json", headers={"If-Match": state["etag"]})
    assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]
    client.get(url(state["slug"]))  # the page sets the csrftoken cookie
    token = client.cookies["csrftoken"].value
    headers = {"X-CSRFToken": token, "If-Match": state["etag"]}
    accepted = client.put(save_url, body, content_type="application/json", headers=headers)
    assert accepted.status_code == 200


def test_api_operations_refuse_other_methods(editor: JsonClient) -> None:
    state = setup()
    assert editor.get(api(state["slug"], "validate")).status_code == 405
    assert editor.get(api(state["slug"], "versions/1/test-runs")).status_code == 405
    assert editor.post(api(state["slug"], "diff")).status_code == 405


@pytest.mark.django_db
def test_the_role_groups_are_created_by_migration_and_kept_when_they_exist() -> None:
    assert ("workflows", "0009_role_groups") in MigrationRecorder(connection).applied_migrations()
    migration = importlib.import_module("workflows.migrations.0009_role_groups")
    assert migration.ROLE_GROUPS == access.ROLES
    Group.objects.filter(name__in=["viewer", "editor"]).delete()
    kept = Group.objects.get_or_create(name=access.OPERATOR)[0]
    kept.permissions.add(Permission.objects.first())
    for _ in range(2):  # idempotent: a second run changes nothing
        migration.create_role_groups(apps, None)
    assert sorted(Group.objects.values_list("name", flat=True)) == sorted(access.ROLES)
    assert Group.objects.get(pk=kept.pk).permissions.count() == 1
