"""The run lifecycle, part of the transitions family (transitions.py re-exports it): a run's
start (one statement writes the run, its node rows and its first event), its resume and its
end, its compensation (sagas), and the operators' actions on a run (cancel, replay of a dead
node, re-run of finished nodes). The attempts' lifecycle is in transitions.py.

Each is a conditional UPDATE (or an INSERT that a conflict makes a no-op), declared with
`@performs` against the one table of moves (core/states.py), as in the rest of the family.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from workflows.core.states import NODE_TERMINAL, Cause, NodeStatus as N, RunStatus as R, can_move_run
from workflows.runtime.lifecycle import RELAXED_COMMIT_IF, execute, performs, rows_of
from workflows.store.models import MapItem, NodeRun, Run
from workflows.store.statements import CHILD_RUNS, EVENTS, NODES, RUNS, WORKFLOWS


class CreatedRun(NamedTuple):
    """create_run's row."""

    run_id: int
    status: str
    created_at: datetime
    node_ids: dict[str, int]  # node id -> its row's id


class WorkflowChanged(Exception):
    """create_run wrote nothing: the workflow's active version or default priority is not the expected one."""


class CreatedItem(NamedTuple):
    """create_runs' row for each run it wrote."""

    ord: int  # the item's place in the batch
    run_id: int
    status: str
    created_at: datetime


class Ended(NamedTuple):
    """A run that finish_runs or end_compensations ended, and how."""

    run_id: int
    status: str


class FinishRun(NamedTuple):
    run_id: int
    epoch: int  # the snapshot's: a replay since makes the decision stale
    status: str


# --------------------------------------------------------------------------- start of a run

# The run, its node rows and its first event in one statement. Root nodes that have a job
# (%(job_ids)s, '' for the others) are written queued at attempt 1 unless the run waits.
# With %(hold)s a run is written waiting (a debounced or singleton-queued start,
# runs/startkeys.py, with its %(start_key)s and %(start_due)s).
# With %(expect_version)s and %(expect_priority)s (else NULL), the workflow must still have
# that active version and default priority (a web process read them earlier, perhaps from
# its cache): if not, nothing is written and the one row answered has a NULL id.
CREATE_RUN_SQL = f"""
WITH wf AS (
    SELECT paused FROM {WORKFLOWS}, {RELAXED_COMMIT_IF}
    WHERE id = %(workflow)s
      AND (%(expect_version)s::bigint IS NULL OR active_version_id = %(expect_version)s::bigint)
      AND (%(expect_priority)s::smallint IS NULL OR default_priority = %(expect_priority)s::smallint)
),
run AS (
    INSERT INTO {RUNS}
        (workflow_id, version_id, status, input, idempotency_key, request_hash, epoch, created_at, priority,
         start_key, start_due_at)
    SELECT %(workflow)s, %(version)s,
           CASE WHEN wf.paused OR %(hold)s::boolean THEN '{R.WAITING}' ELSE '{R.RUNNING}' END,
           %(input)s::jsonb, %(key)s, %(hash)s, 0, now(), %(priority)s, %(start_key)s, %(start_due)s::timestamptz
    FROM wf
    ON CONFLICT (workflow_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id, status, created_at
),
nodes AS (
    INSERT INTO {NODES}
        (run_id, node_id, status, attempt, tries, queue, job_id, queued_at, worker, error, traceback)
    SELECT run.id, n.node_id, CASE WHEN go THEN '{N.QUEUED}' ELSE '{N.PENDING}' END, go::int, go::int, n.queue,
           CASE WHEN go THEN n.job_id ELSE '' END, CASE WHEN go THEN run.created_at END, '', '', ''
    FROM run, unnest(%(nodes)s::text[], %(queues)s::text[], %(job_ids)s::text[]) AS n(node_id, queue, job_id),
         LATERAL (SELECT n.job_id <> '' AND run.status = '{R.RUNNING}' AS go) AS dispatch
    RETURNING id, node_id
),
history AS (
    INSERT INTO {EVENTS} (run_id, kind, node_id, attempt, at, worker, data)
    SELECT id, 'run.' || CASE status WHEN '{R.WAITING}' THEN 'waiting' ELSE 'started' END, '', 0, created_at, '', '{{}}'
    FROM run
)
SELECT id, status, created_at, (SELECT json_object_agg(node_id, id) FROM nodes) FROM run
UNION ALL
SELECT NULL, NULL, NULL, NULL WHERE NOT EXISTS (SELECT FROM wf)
"""


@performs(Cause.CREATE, nodes={None: [N.PENDING, N.QUEUED]}, runs={None: [R.RUNNING, R.WAITING]})
def create_run(params: dict[str, Any]) -> CreatedRun | None:
    """Write a run, its node rows and its first event (CREATE_RUN_SQL's parameters).

    Return None when the idempotency key is already taken; raise WorkflowChanged when the
    workflow is not as expected.
    """
    rows = execute(CREATE_RUN_SQL, params)
    if rows and rows[0][0] is None:
        raise WorkflowChanged
    return CreatedRun(*rows[0]) if rows else None


# Many runs of one version, their node rows (all pending: the schedulers claim the roots of
# every run named in a notice in one statement) and their first events in one statement.
# Each run's id is drawn from the sequence before the INSERT, so a returned row names its
# item (%(ords)s) without relying on the order RETURNING gives; a run whose key is taken is
# not written (its drawn id is simply unused). Runs are inserted in key order: a key's
# index entry is held until commit, so two batches taking shared keys in opposite orders
# deadlocked (one of two concurrent 1,000-item batches, reversed, was aborted). Node rows are written run by run in graph
# order, as a lone start writes them, so ids read back in that order.
CREATE_RUNS_SQL = f"""
WITH wf AS (SELECT paused FROM {WORKFLOWS} WHERE id = %(workflow)s),
given AS (
    SELECT nextval(pg_get_serial_sequence('{RUNS}', 'id')) AS id, g.*
    FROM unnest(%(ords)s::int[], %(inputs)s::text[], %(keys)s::text[], %(hashes)s::text[], %(priorities)s::smallint[])
         AS g(ord, input, key, hash, priority)
),
run AS (
    INSERT INTO {RUNS}
        (id, workflow_id, version_id, status, input, idempotency_key, request_hash, epoch, created_at, priority)
    SELECT g.id, %(workflow)s, %(version)s, CASE WHEN wf.paused THEN '{R.WAITING}' ELSE '{R.RUNNING}' END,
           g.input::jsonb, g.key, g.hash, 0, now(), g.priority
    FROM given g, wf ORDER BY g.key, g.ord
    ON CONFLICT (workflow_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id, status, created_at
),
nodes AS (
    INSERT INTO {NODES}
        (run_id, node_id, status, attempt, tries, queue, job_id, queued_at, worker, error, traceback)
    SELECT run.id, n.node_id, '{N.PENDING}', 0, 0, n.queue, '', NULL, '', '', ''
    FROM run, unnest(%(nodes)s::text[], %(queues)s::text[]) WITH ORDINALITY AS n(node_id, queue, pos)
    ORDER BY run.id, n.pos
),
history AS (
    INSERT INTO {EVENTS} (run_id, kind, node_id, attempt, at, worker, data)
    SELECT id, 'run.' || CASE status WHEN '{R.WAITING}' THEN 'waiting' ELSE 'started' END, '', 0, created_at, '', '{{}}'
    FROM run
)
SELECT g.ord, run.id, run.status, run.created_at FROM run JOIN given g ON g.id = run.id
"""


@performs(Cause.CREATE, nodes={None: [N.PENDING]}, runs={None: [R.RUNNING, R.WAITING]})
def create_runs(params: dict[str, Any]) -> list[CreatedItem]:
    """Write runs, their node rows and first events (CREATE_RUNS_SQL's parameters).

    Return a row for each run written; an item whose idempotency key is already taken has none.
    """
    return rows_of(CreatedItem, execute(CREATE_RUNS_SQL, params))


@performs(Cause.RESUME, runs={R.WAITING: [R.RUNNING]})
def resume_runs(run_ids: list[int]) -> int:
    """Start these waiting runs; return how many were waiting."""
    return Run.objects.filter(pk__in=run_ids, status=R.WAITING).update(status=R.RUNNING)


FINISH_RUNS_SQL = f"""WITH done AS (
               UPDATE {RUNS} r SET status = v.status, finished_at = clock_timestamp()
               FROM unnest(%(ids)s::bigint[], %(epochs)s::int[], %(statuses)s::text[]) AS v(id, epoch, status)
               WHERE r.id = v.id AND r.status = '{R.RUNNING}' AND r.epoch = v.epoch
               RETURNING r.id, r.status, r.finished_at
           )
           INSERT INTO {EVENTS} (run_id, kind, node_id, attempt, at, worker, data)
           SELECT id, 'run.' || status, '', 0, finished_at, '', '{{}}' FROM done
           RETURNING run_id, kind"""
# A run `r` no parent waits on: no open ChildRun link names it (ending it moves nothing else).
# Looked up by the child's unique key: spelled `c.settled_at IS NULL`, the open links' partial
# index served the generic plan made while the table was empty, and each end walked every
# open link (tests/integration/test_pgsession.py).
NOBODYS_CHILD = (
    f"NOT EXISTS (SELECT FROM {CHILD_RUNS} c WHERE c.child_id = r.id AND (c.settled_at IS NULL) IS TRUE)"
)
# The same for runs no parent waits on.
FINISH_UNLINKED_RUNS_SQL = FINISH_RUNS_SQL.replace(
    "r.epoch = v.epoch", f"r.epoch = v.epoch\n                 AND {NOBODYS_CHILD}"
)


@performs(Cause.FINISH, runs={R.RUNNING: [R.SUCCEEDED, R.FAILED]})
def finish_runs(finishes: Sequence[FinishRun], unlinked: bool = False) -> list[Ended]:
    """End running runs still at the decision's epoch, with their history events; return
    those ended. With `unlinked`, only those that are nobody's child run (the others are
    left running, for a transaction that also moves their parents: parents.py)."""
    for _, _, status in finishes:
        if not can_move_run(Cause.FINISH, R.RUNNING, R(status)):
            raise ValueError(f"A run cannot finish {status}.")
    rows = execute(
        FINISH_UNLINKED_RUNS_SQL if unlinked else FINISH_RUNS_SQL,
        {
            "ids": [f[0] for f in finishes],
            "epochs": [f[1] for f in finishes],
            "statuses": [f[2] for f in finishes],
        },
    )
    return [Ended(run_id, kind.removeprefix("run.")) for run_id, kind in rows]


# --------------------------------------------------------------------------- compensation (sagas)
# In the transaction that fails or cancels a run (workflows/runtime/compensations.py), a run with nodes to
# undo starts compensating and its steps' rows are written pending; the steps then move as
# tasks (claim, start, finish, retry, dead); the run's end is a conditional UPDATE too.

BEGIN_COMPENSATION_SQL = f"""
UPDATE {RUNS} r SET status = '{R.COMPENSATING}', finished_at = NULL
WHERE r.id = %(run)s AND r.status IN ('{R.FAILED}', '{R.CANCELLED}')
RETURNING r.id
"""

CREATE_STEPS_SQL = f"""
INSERT INTO {NODES} (run_id, node_id, status, attempt, tries, queue, job_id, worker, error, traceback)
SELECT %(run)s, s.node_id, '{N.PENDING}', 0, 0, s.queue, '', '', '', ''
FROM unnest(%(steps)s::text[], %(queues)s::text[]) AS s(node_id, queue)
ON CONFLICT (run_id, node_id) DO NOTHING
"""


@performs(Cause.COMPENSATE, runs={R.FAILED: [R.COMPENSATING], R.CANCELLED: [R.COMPENSATING]})
def begin_compensation(run_id: int) -> bool:
    """Make a failed or cancelled run compensate; return whether it moved."""
    return bool(execute(BEGIN_COMPENSATION_SQL, {"run": run_id}))


@performs(Cause.CREATE, nodes={None: [N.PENDING]})
def create_steps(run_id: int, steps: list[str], queues: list[str]) -> None:
    """Write the pending rows of a compensating run's steps (in its transaction of begin_compensation)."""
    execute(CREATE_STEPS_SQL, {"run": run_id, "steps": steps, "queues": queues})


@performs(Cause.COMPENSATE, runs={R.COMPENSATING: [R.COMPENSATED, R.COMPENSATION_FAILED]})
def end_compensations(ends: Sequence[tuple[int, str]]) -> list[Ended]:
    """End compensating runs as (run id, compensated or compensation_failed), with their
    history events; return those ended."""
    for _, status in ends:
        if not can_move_run(Cause.COMPENSATE, R.COMPENSATING, R(status)):
            raise ValueError(f"A compensating run cannot end {status}.")
    rows = execute(
        f"""WITH done AS (
               UPDATE {RUNS} r SET status = v.status, finished_at = clock_timestamp()
               FROM unnest(%s::bigint[], %s::text[]) AS v(id, status)
               WHERE r.id = v.id AND r.status = '{R.COMPENSATING}'
               RETURNING r.id, r.status, r.finished_at
           )
           INSERT INTO {EVENTS} (run_id, kind, node_id, attempt, at, worker, data)
           SELECT id, 'run.' || status, '', 0, finished_at, '', '{{}}' FROM done
           RETURNING run_id, kind""",
        [[run_id for run_id, _ in ends], [status for _, status in ends]],
    )
    return [Ended(run_id, kind.removeprefix("run.")) for run_id, kind in rows]


# --------------------------------------------------------------------------- operators' actions


@performs(
    Cause.CANCEL,
    nodes={s: [N.CANCELLED] for s in N if s not in NODE_TERMINAL},
    runs={R.RUNNING: [R.CANCELLED], R.WAITING: [R.CANCELLED]},
)
def cancel_run(run: Run, now: datetime) -> bool:
    """Cancel a running or waiting run (locked by the caller) and its unfinished nodes.

    Return whether it was running or waiting; `run` then says cancelled.
    """
    changed = Run.objects.filter(pk=run.pk, status__in=[R.RUNNING, R.WAITING]).update(
        status=R.CANCELLED, finished_at=now, waiting_nodes=0
    )
    if changed:
        NodeRun.objects.filter(run=run).exclude(status__in=NODE_TERMINAL).update(
            status=N.CANCELLED, finished_at=now
        )
        MapItem.objects.filter(run=run).exclude(status__in=NODE_TERMINAL).update(
            status=N.CANCELLED, finished_at=now
        )
        run.status, run.finished_at = R.CANCELLED, now
    return changed == 1


@performs(
    Cause.REPLAY,
    nodes={N.DEAD: [N.PENDING], N.UPSTREAM_FAILED: [N.PENDING]},
    runs={s: [R.RUNNING] for s in (R.RUNNING, R.FAILED, R.SUCCEEDED)},
)
def replay_node(run: Run, noderun_id: int, resets: list[str], edits: dict[str, Any]) -> bool:
    """Put a dead node (fresh retry budget, `edits` applied) and the upstream_failed nodes
    `resets` back to pending, and its run (locked by the caller) running at a new epoch.

    Return whether the node was dead and the run could run again; nothing changes otherwise.
    """
    node = NodeRun.objects.filter(pk=noderun_id, status=N.DEAD)
    if not node.update(status=N.PENDING, tries=0, retryable=True, finished_at=None, due_at=None, **edits):
        return False
    NodeRun.objects.filter(run=run, node_id__in=resets, status=N.UPSTREAM_FAILED).update(
        status=N.PENDING, finished_at=None
    )
    sources = [R.RUNNING, R.FAILED, R.SUCCEEDED]
    if not Run.objects.filter(pk=run.pk, status__in=sources).update(
        status=R.RUNNING, finished_at=None, epoch=run.epoch + 1
    ):
        return False
    run.status, run.finished_at, run.epoch = R.RUNNING, None, run.epoch + 1
    return True


RERUNNABLE = (N.SUCCEEDED, N.DEAD, N.SKIPPED, N.UPSTREAM_FAILED)  # a finished run's nodes


@performs(
    Cause.RERUN,
    nodes={s: [N.PENDING] for s in RERUNNABLE},
    runs={R.FAILED: [R.RUNNING], R.SUCCEEDED: [R.RUNNING]},
)
def rerun_nodes(run: Run, node_ids: list[str]) -> bool:
    """Put finished nodes `node_ids` of a finished run (locked by the caller) back to pending
    with a fresh retry budget and no result, and the run running at a new epoch.

    Return whether the run was finished and every one of the nodes was; nothing changes
    otherwise (the caller's transaction is undone).
    """
    finished = [R.FAILED, R.SUCCEEDED]
    if not Run.objects.filter(pk=run.pk, status__in=finished).update(
        status=R.RUNNING, finished_at=None, epoch=run.epoch + 1
    ):
        return False
    changed = NodeRun.objects.filter(run=run, node_id__in=node_ids, status__in=RERUNNABLE).update(
        status=N.PENDING,
        tries=0,
        retryable=True,
        output=None,
        error="",
        traceback="",
        finished_at=None,
        due_at=None,
    )
    if changed != len(node_ids):
        return False
    run.status, run.finished_at, run.epoch = R.RUNNING, None, run.epoch + 1
    return True
