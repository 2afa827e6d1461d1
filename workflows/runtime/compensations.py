"""Starting a saga's compensation: a failed or cancelled run undoes its succeeded nodes.

`begin_compensations` runs inside the transaction that fails the run (the scheduler's
finish, advancing.apply_finishes) or cancels it (runs.cancel_run): the run moves to
`compensating` and its steps' rows (core/compensation.py) are written pending in the same
commit, so a kill -9 right after leaves a run that the schedulers (or the reconciler) carry
on from PostgreSQL, and one before leaves it running as it was. The steps then run one at
a time (advancing.advance_compensations) as tasks; the run ends compensated or
compensation_failed.
"""

from __future__ import annotations

from collections.abc import Collection

from django.db import transaction
from django.utils import timezone

from workflows.core.compensation import step_node, steps_to_run
from workflows.core.states import NodeStatus as N
from workflows.core.states import RunStatus as R
from workflows.runtime import bus, transitions
from workflows.store.graphs import load_graph
from workflows.store.models import NodeRun, Run, RunEvent


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
