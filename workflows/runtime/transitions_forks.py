"""The creation of a forked run (workflows/forks/), with transitions.py.

A fork is created like any run (cause create), in one transaction with its link
(store/forks.py): the run, running (or waiting, its workflow paused), and its node rows:
those carried over from the origin with the origin's status (succeeded or skipped) and
output, the others pending, for the schedulers to claim as for any run. Callers reach
`create_fork` through `transitions` (re-exported there).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from workflows.core.states import Cause, NodeStatus as N, RunStatus as R
from workflows.runtime.lifecycle import check_move, performs
from workflows.store.models import NodeRun, Run, Workflow


class ForkNode(NamedTuple):
    """A node row of a new fork: pending, or carried (the origin's status, output and times)."""

    node_id: str
    queue: str
    status: str = N.PENDING
    output: Any = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    input_override: Any = None


@performs(
    Cause.CREATE, nodes={None: [N.PENDING, N.SUCCEEDED, N.SKIPPED]}, runs={None: [R.RUNNING, R.WAITING]}
)
def create_fork(run: Run, nodes: Sequence[ForkNode]) -> Run:
    """Write the unsaved `run` (its workflow locked here) and its node rows; return it.

    The run is waiting if its workflow is paused, else running. The workflow's row is locked
    first, so a resume cannot commit between the read of `paused` and this run's commit
    (it would leave the run waiting for ever).
    """
    for node in nodes:
        check_move(Cause.CREATE, None, N(node.status))
    paused = Workflow.objects.select_for_update().filter(pk=run.workflow_id, paused=True).exists()
    run.status = R.WAITING if paused else R.RUNNING
    run.epoch = 0
    run.save(force_insert=True)
    NodeRun.objects.bulk_create(
        NodeRun(
            run=run,
            node_id=n.node_id,
            queue=n.queue,
            status=n.status,
            output=n.output,
            started_at=n.started_at,
            finished_at=n.finished_at,
            input_override=n.input_override,
        )
        for n in nodes
    )
    return run
