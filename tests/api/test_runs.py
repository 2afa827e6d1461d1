"""Runs through the API: idempotent start, listing, detail, cancel, history; bad input of every kind."""

from __future__ import annotations

import socket
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.api.conftest import CHAIN, assert_problem
from tests.integration.conftest import publish, wait_finished
from tests.integration.runtime import Runtime
from workflows.runtime import bus
from workflows.store.models import NodeRun, Run

pytestmark = pytest.mark.django_db


def test_start_answers_201_with_the_run_and_its_location(api, chain) -> None:
    response = api.post("workflows/chain/runs", {"input": {"user": "u-1"}})
    assert response.status_code == 201
    run = response.json()
    assert response["Location"] == run["url"] == f"/api/v1/runs/{run['id']}"
    assert (run["workflow"], run["version"], run["status"]) == ("chain", 1, "running")
    assert Run.objects.get(pk=run["id"]).input == {"user": "u-1"}


def test_an_empty_body_starts_a_run_with_empty_input(api, chain) -> None:
    assert api.post("workflows/chain/runs").status_code == 201


def test_the_same_idempotency_key_returns_the_same_run(api, chain) -> None:
    headers = {"Idempotency-Key": "order-42"}
    first = api.post("workflows/chain/runs", {"input": {"n": 1}}, headers=headers)
    again = api.post("workflows/chain/runs", {"input": {"n": 1}}, headers=headers)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"] and again["Idempotent-Replayed"] == "true"
    assert again.json()["idempotency_key"] == "order-42"
    body = assert_problem(api.post("workflows/chain/runs", {"input": {"n": 2}}, headers=headers), 409)
    assert "order-42" in body["detail"]
    assert Run.objects.count() == 1


def test_an_idempotency_key_must_be_visible_ascii(api, chain) -> None:
    bad = api.post("workflows/chain/runs", {}, headers={"Idempotency-Key": "x" * 201})
    assert_problem(bad, 400, "Idempotency-Key")


def test_a_workflow_without_an_active_version_cannot_start(api) -> None:
    api.post("workflows", {"slug": "empty", "title": "Empty"})
    assert "no active version" in assert_problem(api.post("workflows/empty/runs", {}), 409)["detail"]


def test_a_run_reads_with_every_node(api, chain) -> None:
    run_id = api.post("workflows/chain/runs", {"input": {"k": "v"}}).json()["id"]
    NodeRun.objects.filter(run_id=run_id, node_id="first").update(
        status="succeeded",
        attempt=1,
        output={"ok": True},
        started_at=timezone.now() - timedelta(milliseconds=250),
        finished_at=timezone.now(),
    )
    run = api.get(f"runs/{run_id}").json()
    assert run["input"] == {"k": "v"} and run["dead_letters"] == []
    first, second = run["nodes"]
    assert (first["node_id"], first["status"], first["output"]) == ("first", "succeeded", {"ok": True})
    assert 200 <= first["duration_ms"] <= 1000
    assert (second["node_id"], second["status"], second["duration_ms"]) == ("second", "pending", None)


def test_runs_are_listed_newest_first_with_filters_and_a_cursor(api, chain) -> None:
    ids = [api.post("workflows/chain/runs", {}).json()["id"] for _ in range(5)]
    api.post(f"runs/{ids[0]}/cancel", {})
    page = api.get("runs", limit=2).json()
    rest = api.get("runs", limit=10, cursor=page["next_cursor"]).json()
    assert [r["id"] for r in page["items"] + rest["items"]] == ids[::-1] and rest["next_cursor"] is None
    assert [r["id"] for r in api.get("runs", status="cancelled").json()["items"]] == [ids[0]]
    assert len(api.get("runs", workflow="chain", version=1).json()["items"]) == 5
    assert api.get("runs", workflow="chain", version=2).json()["items"] == []
    later = (timezone.now() + timedelta(hours=1)).isoformat()
    assert api.get("runs", created_after=later).json()["items"] == []
    assert len(api.get("runs", created_before=later).json()["items"]) == 5
    assert_problem(api.get("runs", version=1), 400, "version")
    assert_problem(api.get("runs", status="sleeping"), 400, "status")
    assert_problem(api.get("runs", created_after="2026-01-01T00:00:00"), 400, "created_after")


def test_cancel_then_cancel_again_is_a_conflict(api, chain) -> None:
    run_id = api.post("workflows/chain/runs", {}).json()["id"]
    cancelled = api.post(f"runs/{run_id}/cancel", {"reason": "wrong input"})
    assert cancelled.json()["status"] == "cancelled"
    assert "already cancelled" in assert_problem(api.post(f"runs/{run_id}/cancel", {}), 409)["detail"]
    events = api.get(f"runs/{run_id}/events").json()["items"]
    assert [e["kind"] for e in events] == ["run.started", "run.cancelled"]
    assert events[1]["data"]["reason"] == "wrong input"


def test_history_pages_oldest_first_and_trace_lists_spans(api, chain) -> None:
    run_id = api.post("workflows/chain/runs", {}).json()["id"]
    api.post(f"runs/{run_id}/cancel", {})
    first = api.get(f"runs/{run_id}/events", limit=1).json()
    second = api.get(f"runs/{run_id}/events", limit=1, cursor=first["next_cursor"]).json()
    assert [first["items"][0]["kind"], second["items"][0]["kind"]] == ["run.started", "run.cancelled"]
    assert api.get(f"runs/{run_id}/trace").json() == {"run": run_id, "spans": []}


def test_unknown_and_out_of_range_ids_are_404_problems(api) -> None:
    assert "No run with id 999" in assert_problem(api.get("runs/999"), 404)["detail"]
    assert_problem(api.get("runs/99999999999999999999999"), 404)
    assert_problem(api.get("runs/0"), 404)
    assert_problem(api.get("runs/-1/trace"), 404)
    assert_problem(api.get("no/such/endpoint"), 404)


def test_a_wrong_method_is_405_with_allow(api) -> None:
    response = api.delete("runs")
    assert_problem(response, 405)
    assert response["Allow"] == "GET"


def test_malformed_json_is_400(api, chain) -> None:
    body = assert_problem(api.post("workflows/chain/runs", raw=b'{"input": '), 400, "")
    assert "not valid JSON" in body["detail"]
    assert_problem(api.post("workflows/chain/runs", raw=b'{"input": {"x": NaN}}'), 400)
    assert_problem(api.post("workflows/chain/runs", raw=b'{"input": {"x": 1e999}}'), 400)
    assert_problem(api.post("workflows/chain/runs", raw=b"\xff\xfe{}"), 400)
    assert_problem(api.post("workflows/chain/runs", raw="[" * 100000), 400)
    assert not Run.objects.exists()


def test_wrong_types_name_the_field(api, chain) -> None:
    assert_problem(api.post("workflows/chain/runs", {"input": [1, 2]}), 422, "input")
    assert_problem(api.post("workflows/chain/runs", [1]), 422, "")
    assert_problem(api.post("workflows/chain/runs", {"input": {}, "colour": 1}), 422, "colour")
    assert_problem(api.post("workflows/chain/runs", {"input": {}, "priority": "high"}), 422, "priority")
    assert_problem(
        api.post("workflows/chain/runs", {"input": {"a": {"b": ["ok", "\u0000"]}}}), 422, "input.a.b[1]"
    )
    assert not Run.objects.exists()


def test_another_content_type_is_415(api, chain) -> None:
    assert_problem(api.post("workflows/chain/runs", raw="input=1", content_type="text/plain"), 415)


def test_an_oversized_body_is_413(api, chain, settings) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = assert_problem(api.post("workflows/chain/runs", {"input": {"blob": "x" * 2000}}), 413)
    assert "1000 bytes" in body["detail"]
    assert not Run.objects.exists()


def test_an_input_over_the_engine_limit_is_422(api, chain, settings) -> None:
    settings.SWITCHYARD = {**settings.SWITCHYARD, "MAX_INPUT_BYTES": 100}
    body = assert_problem(api.post("workflows/chain/runs", {"input": {"blob": "x" * 200}}), 422)
    assert "limit is 100 bytes" in body["detail"]


def test_a_burst_start_answers_201_while_redis_is_away_and_the_run_finishes_once_it_is_back(
    transactional_db, api, chain, settings
) -> None:
    """The notice of a start in a burst goes after commit; Redis refusing it must not make a 500
    of a run that exists. The reconciler re-drives the run from PostgreSQL once Redis is back."""
    redis_url = settings.REDIS_URL
    settings.SWITCHYARD = {**settings.SWITCHYARD, "START_BURST_GAP_SECONDS": 1e9}  # all but the first
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    bus.client.cache_clear()  # this process's client, made again from REDIS_URL
    try:
        answers = [api.post("workflows/chain/runs", {"input": {"user": f"u-{n}"}}) for n in range(2)]
    finally:
        settings.REDIS_URL = redis_url
        bus.client.cache_clear()
    assert [a.status_code for a in answers] == [201, 201], answers[-1].content  # alone, then in a burst
    started = list(Run.objects.filter(pk__in=[a.json()["id"] for a in answers]))
    bus.ensure_group()
    rt = Runtime()
    try:
        rt.worker("outage-worker-1")
        rt.scheduler("outage-scheduler-1")
        assert [wait_finished(run).status for run in started] == ["succeeded", "succeeded"]
    finally:
        rt.stop()
    assert set(NodeRun.objects.filter(run__in=started).values_list("attempt", flat=True)) == {1}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_start_whose_input_breaks_the_input_schema_is_refused_naming_each_field(api) -> None:
    schema = {
        "type": "object",
        "properties": {"user_id": {"type": "string", "minLength": 2}, "count": {"type": "integer"}},
        "required": ["user_id", "count"],
    }
    publish("typed", {**CHAIN, "input_schema": schema})
    bad = api.post("workflows/typed/runs", {"input": {"user_id": "x"}})
    body = assert_problem(bad, 422, "input.count", "input.user_id")
    assert [(e["in"], e["code"], e["field"]) for e in body["errors"]] == [
        ("body", "required", "input.count"),
        ("body", "invalid_input", "input.user_id"),
    ]
    assert "input schema" in body["detail"] and Run.objects.count() == 0
    good = api.post("workflows/typed/runs", {"input": {"user_id": "u-7", "count": 2}})
    assert good.status_code == 201


def test_a_version_whose_input_schema_is_not_a_schema_is_refused(api) -> None:
    api.post("workflows", {"slug": "untyped", "title": "Untyped"})
    definition = {**CHAIN, "input_schema": {"type": "objekt"}}
    body = assert_problem(api.post("workflows/untyped/versions", {"definition": definition}), 422)
    assert [e["path"] for e in body["errors"]] == ["definition.input_schema.type"]
