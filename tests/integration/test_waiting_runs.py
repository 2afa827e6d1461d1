"""Runs that wait are shown, counted and found as waiting, with what they wait for, while
their stored status stays running: real workers and scheduler move them (runs/waiting.py)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model

from tests.api.conftest import Api
from tests.integration.conftest import node, publish, wait_finished
from tests.integration.runtime import Runtime, wait_for
from workflows.handlers.demo import DEMO_REFUND
from workflows.integrations import keys
from workflows.runs import actions as runs, search as runsearch, waiting
from workflows.store.models import ChildRun, MapItem, NodeRun, Run, Wait
from workflows.versions import editing
from workflows.waits import waiting as waits


def found(status: str) -> set[int]:
    return set(runsearch.RunSearch(status=status).apply(Run.objects.all()).values_list("id", flat=True))


def shown_counts() -> dict[tuple[int, str], int]:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(waiting.IN_FLIGHT_BY_SHOWN_STATUS_SQL)
        return {(workflow_id, status): n for workflow_id, status, n in cur.fetchall()}


def admin_api() -> Api:
    admin = get_user_model().objects.create_superuser("root", "root@example.test")
    return Api(keys.create_key(admin, "test key", ("admin",))[1])


def test_runs_waiting_on_a_person_an_event_or_a_child_run_are_found_and_counted_as_waiting(
    runtime: Runtime,
) -> None:
    refund = publish("demo-refund", DEMO_REFUND)
    approval, _ = runs.start_run(refund, {"order_id": "A-7", "amount": 25})
    child_flow = publish("hold", {"nodes": [node("hold", "wait.event", config={"key": "input.order_id"})]})
    parent_flow = publish("shop", {"nodes": [node("order", "workflow.run", config={"workflow": "hold"})]})
    parent, _ = runs.start_run(parent_flow, {"order_id": "B-9"})
    wait_for(lambda: Wait.objects.filter(run=approval, closed_at=None).exists(), 30, "the approval to wait")
    wait_for(lambda: ChildRun.objects.filter(parent_run=parent).exists(), 30, "the child run to start")
    child = ChildRun.objects.get(parent_run=parent).child
    wait_for(lambda: Wait.objects.filter(run=child, closed_at=None).exists(), 30, "the child to wait")

    for run in (approval, parent, child):
        run.refresh_from_db()
        assert run.status == "running", "the stored status stays running"
    assert found("waiting") == {approval.pk, parent.pk, child.pk}
    assert found("running") == set()
    said = waiting.waiting_for(Run.objects.all())
    assert said[approval.pk] == [waiting.WaitingFor("a decision", "approve_refund")]
    assert said[child.pk] == [waiting.WaitingFor("an event (B-9)", "hold")]
    assert said[parent.pk] == [waiting.WaitingFor(f"child run #{child.pk} (hold)", "order", child.pk)]
    counts = shown_counts()
    assert counts[(refund.pk, "waiting")] == 1 and (refund.pk, "running") not in counts
    assert counts[(parent_flow.pk, "waiting")] == 1 and counts[(child_flow.pk, "waiting")] == 1

    api = admin_api()
    listed = api.get("runs", status="waiting").json()["items"]
    assert {r["id"] for r in listed} == {approval.pk, parent.pk, child.pk}
    assert api.get("runs", status="running").json()["items"] == []
    detail = api.get(f"runs/{approval.pk}").json()
    assert (detail["status"], detail["waiting_for"]) == (
        "running",
        [{"what": "a decision", "node_id": "approve_refund", "child_run_id": None}],
    )

    waits.post_event("B-9", {"ok": True})
    assert wait_finished(parent).status == "succeeded"
    assert found("waiting") == {approval.pk}, "a run whose wait ended is no longer waiting"
    assert api.get(f"runs/{parent.pk}").json()["waiting_for"] == []


def test_a_run_whose_map_items_are_working_is_shown_running_not_waiting(runtime: Runtime) -> None:
    flow = {
        "nodes": [
            node("summarise", "demo.summarise_document", config={"seconds": 1.5}, map="input.documents"),
        ]
    }
    run, _ = runs.start_run(publish("map", flow), {"documents": ["one", "two"]})
    wait_for(
        lambda: MapItem.objects.filter(node_run__run=run, status="running").exists(), 30, "an item to run"
    )
    run.refresh_from_db()
    assert NodeRun.objects.get(run=run).status == "waiting" and run.waiting_nodes == 1
    assert found("running") == {run.pk} and found("waiting") == set()
    assert waiting.waiting_for([run]) == {}
    assert wait_finished(run).status == "succeeded"


def test_a_run_started_while_its_workflow_is_paused_waits_for_the_resume(db: Any) -> None:
    workflow = publish("paused", {"nodes": [node("only")]})
    runs.pause_workflow(workflow)
    run, _ = runs.start_run(workflow, {})
    assert run.status == "waiting" and found("waiting") == {run.pk}
    assert waiting.waiting_for([run])[run.pk] == [waiting.PAUSED]


def test_a_test_run_is_neither_counted_nor_listed_unless_asked_for(runtime: Runtime) -> None:
    flow = publish("held", {"nodes": [node("hold", "wait.event", config={"key": "input.k"})]})
    live, _ = runs.start_run(flow, {"k": "live"})
    test = editing.start_test_run(flow.active_version, {"k": "test"})
    for run in (live, test):
        wait_for(lambda run=run: Wait.objects.filter(run=run, closed_at=None).exists(), 30, "the wait")
    assert shown_counts() == {(flow.pk, "waiting"): 1}
    assert found("waiting") == {live.pk}
    with_tests = runsearch.RunSearch(status="waiting", include_tests=True).apply(Run.objects.all())
    assert set(with_tests.values_list("id", flat=True)) == {live.pk, test.pk}
