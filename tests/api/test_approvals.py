"""The approvals and events API: listing, reading, deciding, links and events, as problems when refused."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import Api, assert_problem
from tests.integration.conftest import publish
from workflows.integrations import keys
from workflows.runs import actions as runs
from workflows.runtime import advancing
from workflows.store.models import NodeRun, PostedEvent, Run, Wait

pytestmark = pytest.mark.django_db

APPROVAL = {
    "nodes": [
        {
            "id": "ok",
            "handler": "human.approval",
            "config": {
                "title": "Refund?",
                "form": {"type": "object", "properties": {"reason": {"type": "string", "minLength": 3}}},
                "propose": "input",
                "approvers": {"roles": ["operator"]},
            },
        },
        {"id": "after", "handler": "core.noop"},
    ],
    "edges": [{"source": "ok", "target": "after"}],
}


def waiting_run(run_input: dict[str, Any] | None = None) -> tuple[Run, Wait]:
    """Start a run and let the engine claim its approval, as a scheduler does (in this process)."""
    run, _ = runs.start_run(publish("refund", APPROVAL), run_input or {"amount": 12})
    advancing.advance_runs([run.pk])
    return run, Wait.objects.get(run=run)


def as_person(user: Any, *scopes: str) -> Api:
    return Api(keys.create_key(user, "k", scopes or ("operate",))[1])


def test_an_operator_lists_reads_and_decides_an_approval(person: Any) -> None:
    run, wait = waiting_run()
    api = as_person(person("operator"))
    listed = api.get("approvals")
    assert listed.status_code == 200 and [a["id"] for a in listed.json()["items"]] == [wait.pk]
    one = api.get(f"approvals/{wait.pk}").json()
    assert one["context"]["proposed"] == {"amount": 12} and one["status"] == "waiting"
    decided = api.post(f"approvals/{wait.pk}/decide", {"decision": "approve", "fields": {"reason": "fine"}})
    assert decided.status_code == 200, decided.content
    assert decided.json()["result"]["decision"] == "approved"
    assert NodeRun.objects.get(run=run, node_id="ok").status == "succeeded"
    assert_problem(api.post(f"approvals/{wait.pk}/decide", {"decision": "reject"}), 409)


def test_refused_decisions_are_problems_naming_the_reason_or_field(person: Any) -> None:
    _, wait = waiting_run()
    viewer = as_person(person("viewer"))
    assert viewer.get("approvals").json()["items"] == []
    assert_problem(viewer.post(f"approvals/{wait.pk}/decide", {"decision": "approve"}), 403)
    operator = as_person(person("operator"))
    assert_problem(
        operator.post(f"approvals/{wait.pk}/decide", {"decision": "approve", "fields": {"reason": "x"}}),
        422,
        "fields.reason",
    )
    assert_problem(operator.post("approvals/999999/decide", {"decision": "approve"}), 404)
    assert Wait.objects.get(pk=wait.pk).closed_at is None


def test_a_decision_link_decides_once_and_a_forged_one_is_refused(person: Any) -> None:
    _, wait = waiting_run()
    api = as_person(person("operator"))
    made = api.post(f"approvals/{wait.pk}/links", {"decision": "reject"})
    assert made.status_code == 201
    token = made.json()["token"]
    assert_problem(Api(None).post("approvals/decide-by-link", {"token": token + "x"}), 403)
    decided = Api(None).post("approvals/decide-by-link", {"token": token})
    assert decided.status_code == 200 and decided.json()["result"]["via"] == "link"
    assert_problem(Api(None).post("approvals/decide-by-link", {"token": token}), 403)


def test_an_event_nobody_waits_for_is_kept_and_answered_202(person: Any) -> None:
    api = as_person(person("operator"), "run")
    response = api.post("events", {"key": "order-1", "payload": {"paid": True}})
    assert response.status_code == 202
    assert response.json()["retained"] is True and response.json()["woken_runs"] == []
    assert_problem(as_person(person("viewer"), "read").post("events", {"key": "k"}), 403)


def test_an_event_whose_payload_is_null_is_kept_as_null(person: Any) -> None:
    response = as_person(person("operator"), "run").post("events", {"key": "order-2", "payload": None})
    assert response.status_code == 202
    assert PostedEvent.objects.get(key="order-2").payload is None
