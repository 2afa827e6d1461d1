"""The lock order: a parent run, then its child runs, then nodes (lifecycle.LOCK_RUNS,
parents.lock_parents). An operator's cancel (the run, its nodes, then its children) and a
scheduler moving a node into or out of `waiting`, or ending a child run whose parent waits,
wait for each other instead of deadlocking. Real PostgreSQL, two connections.

CI found the deadlock: `cancel_run` of a child run while the scheduler made its wait node
wait (`test_children`), PostgreSQL aborting the cancel with 40P01.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from tests.integration.conftest import node, publish
from tests.integration.runtime import Runtime, wait_for
from workflows.core.states import NodeStatus as N, RunStatus
from workflows.runs import actions as runs
from workflows.runtime import advancing, transitions
from workflows.runtime.transitions import Awake, FinishRun
from workflows.store.errors import Conflict
from workflows.store.models import ChildRun, NodeRun, Run

pytestmark = pytest.mark.django_db(transaction=True)


def waiting_run(status: N) -> tuple[Run, NodeRun]:
    """A run of one wait.event node, its node row put in `status` at attempt 1."""
    workflow = publish("lock-order", {"nodes": [node("w", "wait.event", config={"key": "input.k"})]})
    run, _ = runs.start_run(workflow, {"k": "never"})
    row = NodeRun.objects.get(run=run)
    NodeRun.objects.filter(pk=row.pk).update(status=status, attempt=1, tries=1)
    if status == N.WAITING:
        Run.objects.filter(pk=run.pk).update(waiting_nodes=1)
    row.refresh_from_db()
    return run, row


def enter(row: NodeRun) -> Any:
    return transitions.enter_waits(N.PENDING, [row.pk], [timezone.now() + timedelta(hours=1)])


def decide(row: NodeRun) -> Any:
    return transitions.decide_waits([Awake(row.pk, 1, N.SUCCEEDED, output='{"ok": true}')])


def park(row: NodeRun) -> Any:
    return transitions.park_agent(row.pk, 1)


def resume(row: NodeRun) -> Any:
    return transitions.resume_agents({"ids": [row.pk], "attempts": [1], "job_ids": ["j-1"]})


MOVES: dict[str, tuple[N, Callable[[NodeRun], Any]]] = {
    "enter a wait": (N.PENDING, enter),
    "leave a wait": (N.WAITING, decide),
    "park an agent": (N.RUNNING, park),
    "resume an agent": (N.WAITING, resume),
}


def blocked_on_a_lock(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])
        row = cursor.fetchone()
    return bool(row and row[0] == "Lock")


def while_it_waits(action: Callable[[], Any], what: str) -> Callable[[], dict[str, Any]]:
    """Start `action` in a thread of its own (its own connection) and return once it is blocked
    on a lock held by this transaction; the function returned joins it and gives its outcome
    ("result" or "error")."""
    outcome: dict[str, Any] = {}
    ready = threading.Event()

    def other() -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                outcome["pid"] = cursor.fetchone()[0]
            ready.set()
            outcome["result"] = action()
        except Exception as exc:  # noqa: BLE001 - the test reports what the action raised
            outcome["error"] = exc
        finally:
            ready.set()
            connection.close()

    thread = threading.Thread(target=other)
    thread.start()
    ready.wait(10)
    wait_for(lambda: blocked_on_a_lock(outcome["pid"]) or len(outcome) > 1, 10, f"{what} to block")
    assert list(outcome) == ["pid"], f"{what} did not wait for a lock: {outcome}"

    def joined() -> dict[str, Any]:
        thread.join(30)
        assert not thread.is_alive(), f"{what} is still blocked"
        return outcome

    return joined


@pytest.mark.parametrize("move", MOVES)
def test_a_cancel_and_a_wait_move_of_the_same_run_wait_for_each_other(move: str) -> None:
    status, moves = MOVES[move]
    run, row = waiting_run(status)
    with transaction.atomic():
        locked = runs.locked_run(run.pk)  # the operator's transaction holds the run first
        joined = while_it_waits(lambda: moves(row), f"the move to {move}")
        assert transitions.cancel_run(locked, timezone.now())  # takes the nodes' rows: 40P01 before
    outcome = joined()
    assert "error" not in outcome, outcome["error"]
    assert not outcome["result"]  # the node was cancelled before the move could see it
    assert NodeRun.objects.get(pk=row.pk).status == N.CANCELLED
    assert Run.objects.get(pk=run.pk).waiting_nodes == 0


def finish_failed(child: Run) -> list[int]:
    return advancing.apply_finishes([FinishRun(child.pk, child.epoch, RunStatus.FAILED)])


def cancel_alone(child: Run) -> Run:
    return runs.cancel_run(child.pk, reason="not needed")


ENDS: dict[str, Callable[[Run], Any]] = {
    "the scheduler finishing the child": finish_failed,
    "an operator cancelling the child alone": cancel_alone,
}


@pytest.mark.parametrize("end", ENDS)
def test_a_parent_cancelled_while_its_child_ends_waits_instead_of_deadlocking(
    runtime: Runtime, end: str
) -> None:
    """A cancel takes the parent, then the child; a child's end moves the parent's node, so it
    takes the parent first too (parents.lock_parents), and waits for the cancel."""
    publish("wait-forever", {"nodes": [node("w", "wait.event", config={"key": "input.k"})]})
    top = publish("top", {"nodes": [node("call", "workflow.run", config={"workflow": "wait-forever"})]})
    parent, _ = runs.start_run(top, {"k": "never"})
    child = wait_for(
        lambda: ChildRun.objects.filter(parent_run=parent).select_related("child").first(),
        30,
        "the child run",
    ).child
    with transaction.atomic():
        locked = runs.locked_run(parent.pk)
        joined = while_it_waits(lambda: ENDS[end](child), end)
        assert runs.cancel_locked(locked, "the whole job was dropped", None)  # takes the child
    outcome = joined()
    child.refresh_from_db()
    assert (Run.objects.get(pk=parent.pk).status, child.status) == ("cancelled", "cancelled")
    if end == "the scheduler finishing the child":
        assert outcome == {"pid": outcome["pid"], "result": []}  # the child had already ended
    else:
        assert isinstance(outcome.get("error"), Conflict), outcome  # already cancelled with its parent


def test_a_cancel_and_a_store_that_may_end_the_run_wait_for_each_other() -> None:
    """A worker's store of a node with no successor may end its run in the same statement
    (execution.settle, transitions.ENDED): it takes the run before the node, so it waits for
    a cancel that holds the run and then takes its nodes, instead of deadlocking."""
    run, _ = runs.start_run(publish("lock-order-end", {"nodes": [node("a", "core.echo")]}), {})
    NodeRun.objects.filter(run=run).update(status=N.RUNNING, attempt=1, tries=1)
    row = NodeRun.objects.get(run=run)
    now = timezone.now().isoformat()
    result = {
        "id": row.pk,
        "attempt": 1,
        "status": N.SUCCEEDED,
        "output": "{}",
        "error": "",
        "traceback": "",
        "retryable": True,
        "started_at": now,
        "finished_at": now,
        "span": {"status": N.SUCCEEDED},
        "from_status": N.RUNNING,
    }

    def store() -> transitions.Finished:
        return transitions.finish_attempts([result], "w", [run.pk], ends=[run.pk])

    with transaction.atomic():
        locked = runs.locked_run(run.pk)
        joined = while_it_waits(store, "the store")
        assert transitions.cancel_run(
            locked, timezone.now()
        )  # takes the node's row: 40P01 if the store held it
    outcome = joined()
    assert "error" not in outcome, outcome["error"]
    assert outcome["result"].run_ids == [] and outcome["result"].ended == []  # the node was cancelled first
    assert (Run.objects.get(pk=run.pk).status, NodeRun.objects.get(pk=row.pk).status) == (
        "cancelled",
        "cancelled",
    )
