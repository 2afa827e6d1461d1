"""Debounce and singleton on starts through the API (workflows/runs/startkeys.py)."""

from __future__ import annotations

import pytest

from tests.api.conftest import assert_problem
from tests.integration.conftest import node, publish
from workflows.store.models import Run

pytestmark = pytest.mark.django_db


def test_a_singleton_skip_start_while_its_key_is_active_answers_409_naming_the_active_run(api) -> None:
    publish("one-per-order", {"nodes": [node("a")], "singleton": {"key": "input.order", "mode": "skip"}})
    first = api.post("workflows/one-per-order/runs", {"input": {"order": "o-1"}})
    assert first.status_code == 201

    refused = assert_problem(
        api.post("workflows/one-per-order/runs", {"input": {"order": "o-1"}}), 409, "singleton.key"
    )

    assert f"run {first.json()['id']}" in refused["detail"]
    assert Run.objects.filter(workflow__slug="one-per-order").count() == 1
    assert api.post("workflows/one-per-order/runs", {"input": {"order": "o-2"}}).status_code == 201


def test_a_singleton_queue_start_is_written_waiting_behind_the_active_run(api) -> None:
    publish("queued-orders", {"nodes": [node("a")], "singleton": {"key": "input.order", "mode": "queue"}})
    first = api.post("workflows/queued-orders/runs", {"input": {"order": "o-1"}}).json()
    second = api.post("workflows/queued-orders/runs", {"input": {"order": "o-1"}})
    assert second.status_code == 201
    assert (first["status"], second.json()["status"]) == ("running", "waiting")


def test_a_debounced_start_cancels_the_waiting_one_with_a_reason_naming_the_new_run(api) -> None:
    publish("debounced", {"nodes": [node("a")], "debounce": {"key": "input.user", "window_s": 30}})
    first = api.post("workflows/debounced/runs", {"input": {"user": "u"}}).json()
    second = api.post("workflows/debounced/runs", {"input": {"user": "u"}}).json()

    assert Run.objects.get(pk=first["id"]).status == "cancelled"
    assert second["status"] == "waiting"
    history = api.get(f"runs/{first['id']}/events").json()
    reasons = [e["data"].get("reason") for e in history["items"] if e["kind"] == "run.cancelled"]
    assert reasons == [f"debounced: replaced by run {second['id']}"]


def test_a_key_that_cannot_resolve_is_refused_when_saved_naming_the_field(api, chain) -> None:
    definition = {
        "nodes": [node("a"), node("b", concurrency={"key": "upstream.nowhere.id", "limit": 2})],
        "edges": [{"source": "a", "target": "b"}],
    }
    body = assert_problem(api.post("workflows/chain/versions", {"definition": definition}), 422)
    assert [e["path"] for e in body["errors"]] == ["definition.nodes[1].concurrency.key"]
    assert "'nowhere', which is not a direct predecessor" in body["errors"][0]["message"]


def test_a_singleton_start_repeated_with_its_idempotency_key_answers_its_own_run(api) -> None:
    publish("once", {"nodes": [node("a")], "singleton": {"key": "input.order", "mode": "skip"}})
    headers = {"Idempotency-Key": "order-1"}
    first = api.post("workflows/once/runs", {"input": {"order": "o-1"}}, headers=headers)
    again = api.post("workflows/once/runs", {"input": {"order": "o-1"}}, headers=headers)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
