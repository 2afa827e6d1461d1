"""Sagas, end to end: a failed or cancelled run undoes its succeeded nodes, newest first,
with real Postgres, Redis, RQ workers and schedulers."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.conftest import node, publish, wait_finished
from tests.integration.runtime import Runtime, wait_for
from workflows.handlers.demo import DEMO_SAGA
from workflows.runs import actions as runs
from workflows.store.errors import Conflict, Invalid
from workflows.store.models import AuditEntry, ChildRun, DeadLetter, NodeRun, Run, RunEvent
from workflows.versions import publish as versions

FINISHED = {"succeeded", "failed", "cancelled", "compensated", "compensation_failed"}


def ended(run: Run, timeout: float = 60.0) -> Run:
    def done() -> Run | None:
        run.refresh_from_db()
        return run if run.status in FINISHED else None

    return wait_for(done, timeout, f"run {run.pk} to end")


def steps_in_order(run: Run) -> list[tuple[str, str]]:
    rows = NodeRun.objects.filter(run=run, node_id__endswith="~compensate").order_by("finished_at", "id")
    return list(rows.values_list("node_id", "status"))


def test_the_saga_demo_releases_the_reservation_when_the_payment_fails(runtime: Runtime) -> None:
    run, _ = runs.start_run(publish("demo-order-saga", DEMO_SAGA), {"order_id": "A-7", "card": "declined"})
    assert ended(run).status == "compensated"
    nodes = dict(NodeRun.objects.filter(run=run).values_list("node_id", "status"))
    assert nodes == {
        "reserve_inventory": "succeeded",
        "charge_payment": "dead",
        "ship_order": "upstream_failed",
        "reserve_inventory~compensate": "succeeded",
    }
    reserved = NodeRun.objects.get(run=run, node_id="reserve_inventory").output
    released = NodeRun.objects.get(run=run, node_id="reserve_inventory~compensate").output
    assert released == {"released": reserved["reservation"]}
    kinds = list(
        RunEvent.objects.filter(run=run, kind__startswith="run.")
        .order_by("id")
        .values_list("kind", flat=True)
    )
    assert kinds == ["run.started", "run.failed", "run.compensating", "run.compensated"]


def test_the_saga_undoes_its_nodes_in_reverse_order_of_completion(runtime: Runtime) -> None:
    run, _ = runs.start_run(publish("demo-order-saga", DEMO_SAGA), {"order_id": "A-8", "address": "nowhere"})
    assert ended(run).status == "compensated"
    assert steps_in_order(run) == [
        ("charge_payment~compensate", "succeeded"),
        ("reserve_inventory~compensate", "succeeded"),
    ]
    refund = NodeRun.objects.get(run=run, node_id="charge_payment~compensate")
    release = NodeRun.objects.get(run=run, node_id="reserve_inventory~compensate")
    assert refund.finished_at <= release.started_at  # one at a time
    charged = NodeRun.objects.get(run=run, node_id="charge_payment").output
    assert refund.output == {"refunded": charged["charge"]}


def test_a_compensation_that_fails_lands_in_the_dead_letters_and_the_run_ends_compensation_failed(
    runtime: Runtime,
) -> None:
    broken = {
        "handler": "core.fail",
        "config": {"message": "warehouse API is down"},
        "retry": {"max_attempts": 2},
    }
    flow = {
        "nodes": [
            node("reserve", "core.echo", compensate=broken),
            node("charge", "core.echo", compensate={"handler": "core.echo"}),
            node("ship", "core.fail"),
        ],
        "edges": [{"source": "reserve", "target": "charge"}, {"source": "charge", "target": "ship"}],
    }
    run, _ = runs.start_run(publish("fragile-saga", flow), {})
    assert ended(run).status == "compensation_failed"
    # The dead step does not stop the saga: charge was undone first, reserve's undo died.
    assert steps_in_order(run) == [("charge~compensate", "succeeded"), ("reserve~compensate", "dead")]
    letter = DeadLetter.objects.get(run=run, node_id="reserve~compensate")
    assert (letter.error, letter.attempt) == ("warehouse API is down", 2)
    assert letter.input_snapshot["config"] == {"message": "warehouse API is down"}
    assert letter.input_snapshot["upstream"] == {
        "reserve": NodeRun.objects.get(run=run, node_id="reserve").output
    }
    with pytest.raises(Conflict, match="compensation_failed"):
        runs.replay_dead_letter(letter.pk)


def test_a_cancelled_run_undoes_what_it_did(runtime: Runtime) -> None:
    flow = {
        "nodes": [
            node("reserve", "core.echo", compensate={"handler": "core.echo"}),
            node("hold", "wait.event", config={"key": "input.k"}),
        ],
        "edges": [{"source": "reserve", "target": "hold"}],
    }
    run, _ = runs.start_run(publish("cancel-saga", flow), {"k": "never"})
    wait_for(
        lambda: NodeRun.objects.filter(run=run, node_id="hold", status="waiting").exists(), 30, "the wait"
    )
    runs.cancel_run(run.pk, reason="customer changed their mind")
    assert ended(run).status == "compensated"
    assert steps_in_order(run) == [("reserve~compensate", "succeeded")]
    assert NodeRun.objects.get(run=run, node_id="hold").status == "cancelled"


def test_a_run_with_nothing_to_undo_just_fails(runtime: Runtime) -> None:
    flow = {"nodes": [node("a", "core.fail", compensate={"handler": "core.echo"})]}
    run, _ = runs.start_run(publish("nothing-to-undo", flow), {})
    assert ended(run).status == "failed"
    assert not NodeRun.objects.filter(run=run, node_id__endswith="~compensate").exists()


def test_a_compensated_child_run_fails_its_parent_node(runtime: Runtime) -> None:
    publish("demo-order-saga", DEMO_SAGA)
    flow = {"nodes": [node("order", "workflow.run", config={"workflow": "demo-order-saga"})]}
    run, _ = runs.start_run(publish("shop", flow), {"order_id": "A-9", "card": "declined"})
    assert wait_finished(run).status == "failed"
    child = ChildRun.objects.get(parent_run=run).child
    assert child.status == "compensated"
    error = NodeRun.objects.get(run=run, node_id="order").error
    assert (
        f"Child run {child.pk} of workflow 'demo-order-saga' failed (then compensated): node 'charge_payment'"
        in error
    )


@pytest.mark.parametrize(
    ("compensate", "path", "message"),
    [
        ({"handler": "nope.undo"}, "nodes[0].compensate.handler", "unknown handler 'nope.undo'"),
        (
            {"handler": "core.delay", "config": {}},
            "nodes[0].compensate.config",
            "'seconds' is a required property",
        ),
        ({"handler": "wait.timer"}, "nodes[0].compensate.handler", "wait.timer cannot undo a node"),
        ({"handler": "core.echo", "extra": 1}, "nodes[0].compensate.extra", "unknown field 'extra'"),
    ],
)
def test_a_bad_compensate_is_refused_naming_the_field(
    transactional_db: Any, compensate: dict[str, Any], path: str, message: str
) -> None:
    workflow = versions.create_workflow("bad-saga", "Bad")
    with pytest.raises(Invalid) as refused:
        versions.create_version(workflow, {"nodes": [node("a", "core.echo", compensate=compensate)]})
    (issue,) = refused.value.issues
    assert issue.path == path and message in issue.message and issue.node == "a"


def test_the_failure_a_saga_undid_is_closed_as_compensated_naming_its_steps(runtime: Runtime) -> None:
    run, _ = runs.start_run(publish("demo-order-saga", DEMO_SAGA), {"order_id": "A-10", "card": "declined"})
    assert ended(run).status == "compensated"
    letter = DeadLetter.objects.get(run=run, node_id="charge_payment")
    assert letter.status == "compensated"
    assert letter.resolved_at is not None and letter.resolved_by is None
    assert "reserve_inventory~compensate" in letter.reason
    entry = AuditEntry.objects.get(action="deadletter.compensated", target_id=str(letter.pk))
    assert entry.actor is None and entry.data["steps"] == ["reserve_inventory~compensate"]
    assert RunEvent.objects.filter(run=run, kind="deadletter.compensated", node_id="charge_payment").exists()
    with pytest.raises(Conflict, match="already compensated"):
        runs.replay_dead_letter(letter.pk)


def test_a_saga_that_could_not_undo_everything_leaves_its_letters_open(runtime: Runtime) -> None:
    flow = {
        "nodes": [
            node("reserve", "core.echo", compensate={"handler": "core.fail", "config": {"message": "down"}}),
            node("ship", "core.fail"),
        ],
        "edges": [{"source": "reserve", "target": "ship"}],
    }
    run, _ = runs.start_run(publish("half-undone", flow), {})
    assert ended(run).status == "compensation_failed"
    statuses = dict(DeadLetter.objects.filter(run=run).values_list("node_id", "status"))
    assert statuses == {"ship": "open", "reserve~compensate": "open"}


def test_a_compensated_child_runs_letter_is_closed_and_its_parents_stays_open(runtime: Runtime) -> None:
    publish("demo-order-saga", DEMO_SAGA)
    flow = {"nodes": [node("order", "workflow.run", config={"workflow": "demo-order-saga"})]}
    run, _ = runs.start_run(publish("shop-letters", flow), {"order_id": "A-11", "card": "declined"})
    assert wait_finished(run).status == "failed"
    child = ChildRun.objects.get(parent_run=run).child
    assert list(DeadLetter.objects.filter(run=child).values_list("status", flat=True)) == ["compensated"]
    # The parent undid nothing (no compensate of its own): its failure is an operator's to look at.
    assert list(DeadLetter.objects.filter(run=run).values_list("status", flat=True)) == ["open"]
