"""Starting a saga's compensation: a failed or cancelled run undoes its succeeded nodes.

`begin_compensations` runs inside the transaction that fails the run (the scheduler's
finish, advancing.apply_finishes) or cancels it (runs.cancel_run): the run moves to
`compensating` and its steps' rows (core/compensation.py) are written pending in the same
commit, so a kill -9 right after leaves a run that the schedulers (or the reconciler) carry
on from PostgreSQL, and one before leaves it running as it was. The steps then run one at
a time (advancing.advance_compensations) as tasks; the run ends compensated or
compensation_failed.

`resolve_compensated_letters` closes what a saga settled: when a run ends compensated
(every step succeeded), the open dead letters of its nodes (the failure that set the saga
off) are expected failures, undone, not work for an operator. They are closed as
`compensated` in the transaction that ends the run, with a reason naming the steps that
undid the work, a history event and an audit entry (actor: the system). A run that ends
compensation_failed keeps its letters open: something was not undone.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from workflows.core.compensation import is_step, step_node, steps_to_run
from workflows.core.states import NodeStatus as N, RunStatus as R
from workflows.runtime import bus, transitions
from workflows.store import audit
from workflows.store.graphs import load_graph
from workflows.store.models import DeadLetter, NodeRun, Run, RunEvent


def begin_compensations(run_ids: Collection[int]) -> list[int]:
    """Make these failed or cancelled runs compensate where they have anything to undo;
    return the runs that now compensate. Call inside the transaction that ended them."""
    if not run_ids:
        return []
    runs = Run.objects.filter(pk__in=run_ids, status__in=[R.FAILED, R.CANCELLED]).values_list(
        "id", "version_id", "status"
    )
    started = [run_id for run_id, version_id, status in runs if begin(run_id, version_id, status)]
    if started:
        transaction.on_commit(lambda: bus.notify(started))
    return started


def begin(run_id: int, version_id: int, status: str) -> bool:
    graph = load_graph(version_id)
    if not any(node.compensate for node in graph.nodes.values()):
        return False
    succeeded = list(
        NodeRun.objects.filter(run_id=run_id, status=N.SUCCEEDED, node_id__in=list(graph.nodes))
        .order_by("finished_at", "id")
        .values_list("node_id", flat=True)
    )
    steps = steps_to_run(graph, succeeded)
    if not steps:
        return False
    queues = [step_node(graph, step).queue for step in steps]
    if not transitions.begin_compensation(run_id):
        return False
    transitions.create_steps(run_id, steps, queues)
    RunEvent.objects.create(
        run_id=run_id,
        kind="run.compensating",
        node_id="",
        attempt=0,
        at=timezone.now(),
        data={"after": status, "steps": steps},
    )
    return True


def resolve_compensated_letters(run_ids: Collection[int]) -> list[int]:
    """Close the open dead letters of these runs, just ended compensated, as compensated;
    return the letters closed. Call inside the transaction that ended the runs."""
    letters = list(
        DeadLetter.objects.select_for_update()
        .filter(run_id__in=run_ids, status=DeadLetter.OPEN)
        .order_by("id")
    )
    if not letters:
        return []
    steps = steps_by_run({letter.run_id for letter in letters})
    now = timezone.now()
    for letter in letters:
        resolve(letter, steps.get(letter.run_id, []), now)
    return [letter.pk for letter in letters]


def steps_by_run(run_ids: Collection[int]) -> dict[int, list[str]]:
    """Each run -> its succeeded compensation steps, in the order they ran."""
    rows = (
        NodeRun.objects.filter(run_id__in=run_ids, status=N.SUCCEEDED, node_id__contains="~")
        .order_by("finished_at", "id")
        .values_list("run_id", "node_id")
    )
    steps: dict[int, list[str]] = {}
    for run_id, node_id in rows:
        if is_step(node_id):
            steps.setdefault(run_id, []).append(node_id)
    return steps


def resolve(letter: DeadLetter, steps: list[str], now: datetime) -> None:
    by = ", ".join(steps) or "its saga"
    letter.status, letter.resolved_at, letter.resolved_by = DeadLetter.COMPENSATED, now, None
    letter.reason = f"run {letter.run_id} undid its work by {by}; nothing is left to replay"
    letter.save(update_fields=["status", "resolved_at", "resolved_by", "reason"])
    RunEvent.objects.create(
        run_id=letter.run_id,
        kind="deadletter.compensated",
        node_id=letter.node_id,
        attempt=letter.attempt,
        at=now,
        data={"letter": letter.pk, "steps": steps},
    )
    audit.record(None, "deadletter.compensated", letter, run=letter.run_id, node=letter.node_id, steps=steps)
