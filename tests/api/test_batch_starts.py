"""Starts in bulk: POST /workflows/{slug}/runs:batch, runs.start_runs and `manage.py runs start-batch`."""

from __future__ import annotations

import json
import threading
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.api.conftest import CHAIN, assert_problem
from tests.integration.conftest import publish, wait_finished
from workflows.api.api import document
from workflows.runs import actions as runs
from workflows.runtime import bus
from workflows.store.models import NodeRun, Run, RunEvent, RunTraceParent, Workflow

pytestmark = pytest.mark.django_db
BATCH = "workflows/chain/runs:batch"


def items(count: int, **fields: object) -> dict[str, object]:
    return {"items": [{"input": {"n": n}, **fields} for n in range(count)]}


def test_a_batch_starts_every_run_in_one_insert_and_answers_them_in_item_order(api, chain) -> None:
    with CaptureQueriesContext(connection) as queries:
        response = api.post(BATCH, items(50))
    inserts = [q["sql"] for q in queries.captured_queries if "INSERT INTO" in q["sql"]]
    assert len(inserts) == 1 and "workflows_noderun" in inserts[0]
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["created"], body["existing"], len(body["items"])) == (50, 0, 50)
    assert all(item["created"] and item["status"] == "running" for item in body["items"])
    ids = [item["id"] for item in body["items"]]
    assert [Run.objects.get(pk=i).input["n"] for i in ids] == list(range(50))
    assert NodeRun.objects.filter(run_id__in=ids, status="pending").count() == 100
    assert RunEvent.objects.filter(run_id__in=ids, kind="run.started").count() == 50
    first = api.get(f"runs/{ids[7]}").json()
    assert [n["node_id"] for n in first["nodes"]] == ["first", "second"]


def test_the_schedulers_are_told_of_a_batch_after_commit_in_notices_of_at_most_100_runs(
    api, chain, django_capture_on_commit_callbacks
) -> None:
    bus.ensure_group()
    with django_capture_on_commit_callbacks() as callbacks:
        api.post(BATCH, items(250))
        assert not bus.client().xlen(bus.NOTICES)
    for callback in callbacks:
        callback()
    notices = bus.parse_notices(bus.client().xrange(bus.NOTICES))
    assert sorted(len(n.run_ids) for n in notices) == [50, 100, 100]


def test_each_item_is_idempotent_on_its_own_key(api, chain) -> None:
    first = api.post(BATCH, {"items": [{"input": {"n": 1}, "idempotency_key": "a"}]}).json()
    again = api.post(
        BATCH,
        {
            "items": [
                {"input": {"n": 2}, "idempotency_key": "b"},
                {"input": {"n": 1}, "idempotency_key": "a"},
                {"input": {"n": 2}, "idempotency_key": "b"},
                {"input": {"n": 3}},
            ]
        },
    ).json()
    answered = [(item["created"], item["idempotency_key"]) for item in again["items"]]
    assert answered == [(True, "b"), (False, "a"), (False, "b"), (True, None)]
    assert again["items"][1]["id"] == first["items"][0]["id"]
    assert again["items"][0]["id"] == again["items"][2]["id"]
    assert (again["created"], again["existing"]) == (2, 2) and Run.objects.count() == 3


def test_a_single_start_and_a_batch_share_idempotency_keys(api, chain) -> None:
    single = api.post("workflows/chain/runs", {"input": {"n": 1}}, headers={"Idempotency-Key": "k"})
    batch = api.post(BATCH, {"items": [{"input": {"n": 1}, "idempotency_key": "k"}]}).json()
    assert batch["items"][0]["id"] == single.json()["id"] and not batch["items"][0]["created"]


def test_a_key_used_before_with_another_input_refuses_the_whole_batch_naming_the_item(api, chain) -> None:
    api.post(BATCH, {"items": [{"input": {"n": 1}, "idempotency_key": "a"}]})
    bad = api.post(BATCH, {"items": [{"input": {"n": 9}}, {"input": {"n": 2}, "idempotency_key": "a"}]})
    body = assert_problem(bad, 409, "items[1].idempotency_key")
    assert "'a'" in body["errors"][0]["message"] and Run.objects.count() == 1


def test_one_key_twice_in_a_batch_with_two_inputs_is_refused(api, chain) -> None:
    bad = api.post(
        BATCH,
        {"items": [{"input": {"n": 1}, "idempotency_key": "a"}, {"input": {"n": 2}, "idempotency_key": "a"}]},
    )
    body = assert_problem(bad, 422, "items[1].idempotency_key")
    assert "item 0" in body["errors"][0]["message"] and not Run.objects.exists()


def test_more_than_1000_items_are_refused_naming_the_limit(api, chain) -> None:
    body = assert_problem(api.post(BATCH, items(1001)), 422, "items")
    assert "1000" in body["errors"][0]["message"] and not Run.objects.exists()
    assert_problem(api.post(BATCH, {"items": []}), 422, "items")


def test_a_batch_over_the_body_limit_is_413(api, chain, settings) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    assert "1000 bytes" in assert_problem(api.post(BATCH, items(100)), 413)["detail"]
    assert not Run.objects.exists()


def test_bad_items_are_all_listed_by_index_and_field_and_nothing_starts(api) -> None:
    schema = {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}
    publish("typed", {**CHAIN, "input_schema": schema})
    sent = [{"input": {"count": 1}}, {"input": {}}, {"input": {"count": 2}}, {"input": {"count": "x"}}]
    body = assert_problem(
        api.post("workflows/typed/runs:batch", {"items": sent}),
        422,
        *[
            "items[1].input.count",
            "items[3].input.count",
        ],
    )
    assert [e["code"] for e in body["errors"]] == ["required", "invalid_input"]
    assert "2 items" in body["detail"] and not Run.objects.exists()


def test_items_of_the_wrong_shape_are_refused_naming_index_and_field(api, chain) -> None:
    sent = [
        {"input": {}},
        {"input": [1]},
        {"input": {}, "priority": 101},
        {"input": {}, "idempotency_key": "a b"},
    ]
    assert_problem(
        api.post(BATCH, {"items": sent}),
        422,
        "items[1].input",
        "items[2].priority",
        "items[3].idempotency_key",
    )
    assert not Run.objects.exists()


def test_an_item_over_the_input_limit_is_named(api, chain, settings) -> None:
    settings.SWITCHYARD = {**settings.SWITCHYARD, "MAX_INPUT_BYTES": 100}
    body = assert_problem(
        api.post(BATCH, {"items": [{}, {"input": {"blob": "x" * 200}}]}), 422, "items[1].input"
    )
    assert "limit is 100 bytes" in body["errors"][0]["message"]


@pytest.mark.parametrize(("scopes", "status"), [(("read",), 403), (("run",), 200)])
def test_a_batch_needs_the_run_scope_as_a_single_start_does(api_as, chain, scopes, status) -> None:
    response = api_as("operator", *scopes).post(BATCH, items(2))
    assert response.status_code == status, response.content
    assert Run.objects.count() == (2 if status == 200 else 0)


def test_a_batch_of_a_paused_workflow_waits(api, chain) -> None:
    api.post("workflows/chain/pause")
    body = api.post(BATCH, items(3)).json()
    assert {item["status"] for item in body["items"]} == {"waiting"}


def test_a_traceparent_is_kept_for_every_new_run(api, chain) -> None:
    header = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    body = api.post(BATCH, items(3), headers=header).json()
    ids = [item["id"] for item in body["items"]]
    assert RunTraceParent.objects.filter(run_id__in=ids).count() == 3


def test_start_runs_in_python_refuses_a_batch_over_the_limit(chain: Workflow) -> None:
    with pytest.raises(runs.Invalid, match="limit is 1000"):
        runs.start_runs(chain, [runs.StartItem({})] * 1001)


def test_the_cli_starts_a_batch_from_a_file_of_inputs(chain, tmp_path) -> None:
    lines = [json.dumps({"input": {"n": 1}, "idempotency_key": "x"}), json.dumps({"input": {"n": 2}}), ""]
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(lines))
    out = StringIO()
    call_command("runs", "start-batch", "chain", "--inputs-file", str(path), stdout=out)
    assert "2 runs started, 0 already existed" in out.getvalue()
    call_command("runs", "start-batch", "chain", "--inputs-file", str(path), stdout=out)
    assert "1 runs started, 1 already existed" in out.getvalue()


def test_the_cli_starts_count_runs_of_one_input(chain) -> None:
    out = StringIO()
    call_command("runs", "start-batch", "chain", "--count", "5", "--input", '{"n": 3}', stdout=out)
    assert Run.objects.filter(input={"n": 3}).count() == 5


def test_a_batch_runs_to_completion_on_real_workers(transactional_db, api, runtime) -> None:
    publish("chain", CHAIN)
    body = api.post(BATCH, items(40)).json()
    started = list(Run.objects.filter(pk__in=[item["id"] for item in body["items"]]))
    assert [wait_finished(run).status for run in started] == ["succeeded"] * 40
    assert set(NodeRun.objects.filter(run__in=started).values_list("status", "attempt")) == {("succeeded", 1)}


def test_the_document_describes_the_batch_start() -> None:
    op = document()["paths"]["/api/v1/workflows/{slug}/runs:batch"]["post"]
    assert (op["operationId"], op["x-scope"]) == ("start_runs", "run")
    assert {"200", "401", "403", "404", "409", "413", "422", "429"} <= set(op["responses"])
    body = op["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/StartBatchIn"}


def test_concurrent_batches_with_the_same_keys_in_opposite_orders_share_their_runs(
    transactional_db, api, chain
) -> None:
    """Each INSERT takes its keys in key order, so two batches cannot deadlock on them."""
    sent = [{"input": {"n": n}, "idempotency_key": f"k-{n:04d}"} for n in range(1000)]
    answers: list[object] = []

    def post(items: list[dict[str, object]]) -> None:
        try:
            answers.append(api.post(BATCH, {"items": items}))
        finally:
            connection.close()

    threads = [threading.Thread(target=post, args=(order,)) for order in (sent, sent[::-1])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [a.status_code for a in answers] == [200, 200], [a.content[:300] for a in answers]
    ids = [sorted(item["id"] for item in a.json()["items"]) for a in answers]
    assert ids[0] == ids[1] and Run.objects.count() == 1000
    assert sum(a.json()["created"] for a in answers) == 1000
