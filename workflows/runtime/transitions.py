"""The one module that changes the status of a node or a run.

Every statement that writes a status is here, and nowhere else (tests/unit/test_transitions.py
scans the tree for any other): the start of a run, the scheduler's claims, the worker's
start and finish of an attempt, skips, retries, dead nodes, finished runs, lost attempts,
and the operator's cancel, replay and resume. Each is a conditional UPDATE
(`... WHERE status = 'pending'`): two processes deciding the same thing change one row once,
and the caller learns from the rows returned what it changed. Each function declares the
moves it performs (`@performs`); every declared move is a move of the one table,
core/states.py (the test checks the table, the declarations and the statuses spelled in
each statement against one another).

What a node is given (its run input, or the edited input a replay gave it, and its succeeded
predecessors' outputs) is read by one query, in two forms: joined to a claim
(`UPSTREAM_OUTPUTS`, `GIVEN_INPUT`), or alone for a dead letter (`read_inputs`). Its rows
are `InputRow`s.

The statements' texts are constants, so psycopg prepares each once per connection
(pgsession.py); statuses are spelled in the text, from the enums, never passed as
parameters where a partial index must serve the generic plan.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple, TypeVar

from django.conf import settings
from django.db import connection
from django.db import models as orm
from django.utils import timezone

from workflows.core.states import NODE_TERMINAL, Cause, can_move_node, can_move_run
from workflows.core.states import NodeStatus as N
from workflows.core.states import RunStatus as R
from workflows.models import MapItem, NodeRun, Run

# Joined into the FROM list of a single autocommit statement, this makes its commit skip the
# wait for the WAL flush (`SET LOCAL` in a statement of its own costs two round trips more).
# Only for changes that can be derived again from what is already durable: claims and
# decisions. If Postgres itself crashes and loses them, the reconciler decides again and
# the attempt runs again (delivery is at-least-once). Runs, results and dead letters are
# always committed synchronously.
RELAXED_COMMIT = "(SELECT set_config('synchronous_commit', 'off', true)) AS relaxed_commit"


# --------------------------------------------------------------------------- declared moves


@dataclass(frozen=True)
class Move:
    """The status changes one function's statements may make: (from, to) pairs, under a cause."""

    cause: Cause
    nodes: tuple[tuple[N | None, N], ...] = ()
    runs: tuple[tuple[R | None, R], ...] = ()

    def is_in_table(self) -> bool:
        return all(can_move_node(self.cause, a, b) for a, b in self.nodes) and all(
            can_move_run(self.cause, a, b) for a, b in self.runs
        )


PERFORMED: dict[str, Move] = {}  # function name -> the move it declares

F = TypeVar("F", bound=Callable[..., Any])


def pairs(moves: Mapping[Any, Iterable[Any]]) -> tuple[tuple[Any, Any], ...]:
    return tuple((source, target) for source, targets in moves.items() for target in targets)


def performs(
    cause: Cause,
    nodes: Mapping[N | None, Iterable[N]] | None = None,
    runs: Mapping[R | None, Iterable[R]] | None = None,
) -> Callable[[F], F]:
    """Declare the moves the decorated function's statements make; refuse one not in the table."""
    move = Move(cause, pairs(nodes or {}), pairs(runs or {}))
    if not move.is_in_table():
        raise ValueError(f"{move} is not in the table of moves (workflows/core/states.py).")

    def declare(func: F) -> F:
        PERFORMED[func.__name__] = move
        return func

    return declare


def check_move(cause: Cause, source: N | None, target: N) -> None:
    """Refuse a move chosen at run time (a parameter of a statement) that the table does not allow."""
    if not can_move_node(cause, source, target):
        raise ValueError(f"A node cannot move from {source} to {target} by {cause}.")


# --------------------------------------------------------------------------- typed rows


class NodeRow(NamedTuple):
    """A node's state as the scheduler decides from it (SNAPSHOT_SQL's rows; a notice's)."""

    noderun_id: int
    run_id: int
    node_id: str
    status: str
    tries: int
    version_id: int
    epoch: int


class InputRow(NamedTuple):
    """A row of what nodes are given: kind 'claim' (an attempt, its version and its run input,
    or None when the claim does not read it) or 'output' (a succeeded node's output; then
    version_id is 0)."""

    kind: str
    noderun_id: int
    attempt: int
    version_id: int
    node_id: str
    run_id: int
    value: Any
    priority: int = 0  # the run's, on the scheduler's claims: it picks the job's RQ lane


class Skip(NamedTuple):
    noderun_id: int
    status: str  # skipped or upstream_failed


class Retry(NamedTuple):
    noderun_id: int
    tries: int  # the failed attempt's: a newer attempt makes the decision stale
    delay: float


class Kill(NamedTuple):
    noderun_id: int
    tries: int


class FinishRun(NamedTuple):
    run_id: int
    epoch: int  # the snapshot's: a replay since makes the decision stale
    status: str


class Lost(NamedTuple):
    noderun_id: int  # or a map item's id
    attempt: int
    error: str
    free: bool = True  # its worker is gone: the attempt does not count (FREE_LOST_ATTEMPTS)


def rows_of(cls: type[NamedTuple], rows: Iterable[Sequence[Any]]) -> list[Any]:
    return [cls(*row) for row in rows]


def execute(sql: str, params: Any) -> list[tuple[Any, ...]]:
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall() if cur.description else []


# --------------------------------------------------------------------------- what a node is given

GIVEN_INPUT = "coalesce(n.input_override, r.input)"  # the run input, or the replay's edited input


def upstream_outputs(runs: str) -> str:
    """The 'output' rows (InputRow) of the succeeded nodes named %(upstream)s in the runs `runs` selects."""
    return f"""SELECT 'output', u.id, u.attempt, 0::bigint, u.node_id, u.run_id, u.output FROM workflows_noderun u
WHERE u.run_id IN ({runs}) AND u.node_id = ANY(%(upstream)s::text[]) AND u.status = '{N.SUCCEEDED}'"""


INPUTS_SQL = f"""
WITH claimed AS (
    SELECT n.id, n.attempt, r.version_id, n.node_id, n.run_id, {GIVEN_INPUT} AS input
    FROM workflows_noderun n JOIN workflows_run r ON r.id = n.run_id
    WHERE n.id = ANY(%(ids)s::bigint[])
)
SELECT 'claim', id, attempt, version_id, node_id, run_id, input FROM claimed
UNION ALL
{upstream_outputs("SELECT run_id FROM claimed")}
"""


def read_inputs(noderun_ids: list[int], upstream: Iterable[str]) -> list[InputRow]:
    """What these nodes are given now: a 'claim' row each, and the outputs of their runs'
    succeeded nodes among `upstream` (their predecessors)."""
    return rows_of(InputRow, execute(INPUTS_SQL, {"ids": noderun_ids, "upstream": sorted(set(upstream))}))


# --------------------------------------------------------------------------- start of a run

# The run, its node rows and its first event in one statement. Root nodes that have a job
# (%(job_ids)s, '' for the others) are written queued at attempt 1 unless the run waits.
# With %(expect_version)s and %(expect_priority)s (else NULL), the workflow must still have
# that active version and default priority (a web process read them earlier, perhaps from
# its cache): if not, nothing is written and the one row answered has a NULL id.
CREATE_RUN_SQL = f"""
WITH wf AS (
    SELECT paused FROM workflows_workflow
    WHERE id = %(workflow)s
      AND (%(expect_version)s::bigint IS NULL OR active_version_id = %(expect_version)s::bigint)
      AND (%(expect_priority)s::smallint IS NULL OR default_priority = %(expect_priority)s::smallint)
),
run AS (
    INSERT INTO workflows_run
        (workflow_id, version_id, status, input, idempotency_key, request_hash, epoch, created_at, priority)
    SELECT %(workflow)s, %(version)s, CASE WHEN wf.paused THEN '{R.WAITING}' ELSE '{R.RUNNING}' END,
           %(input)s::jsonb, %(key)s, %(hash)s, 0, now(), %(priority)s
    FROM wf
    ON CONFLICT (workflow_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id, status, created_at
),
nodes AS (
    INSERT INTO workflows_noderun
        (run_id, node_id, status, attempt, tries, queue, job_id, queued_at, worker, error, traceback)
    SELECT run.id, n.node_id, CASE WHEN go THEN '{N.QUEUED}' ELSE '{N.PENDING}' END, go::int, go::int, n.queue,
           CASE WHEN go THEN n.job_id ELSE '' END, CASE WHEN go THEN run.created_at END, '', '', ''
    FROM run, unnest(%(nodes)s::text[], %(queues)s::text[], %(job_ids)s::text[]) AS n(node_id, queue, job_id),
         LATERAL (SELECT n.job_id <> '' AND run.status = '{R.RUNNING}' AS go) AS dispatch
    RETURNING id, node_id
),
history AS (
    INSERT INTO workflows_runevent (run_id, kind, node_id, attempt, at, worker, data)
    SELECT id, 'run.' || CASE status WHEN '{R.WAITING}' THEN 'waiting' ELSE 'started' END, '', 0, created_at, '', '{{}}'
    FROM run
)
SELECT id, status, created_at, (SELECT json_object_agg(node_id, id) FROM nodes) FROM run
UNION ALL
SELECT NULL, NULL, NULL, NULL WHERE NOT EXISTS (SELECT FROM wf)
"""


@performs(Cause.CREATE, nodes={None: [N.PENDING, N.QUEUED]}, runs={None: [R.RUNNING, R.WAITING]})
def create_run(params: dict[str, Any]) -> tuple[int, str, datetime, dict[str, int]] | None:
    """Write a run, its node rows and its first event (CREATE_RUN_SQL's parameters).

    Return (run id, status, created at, node id -> row id), or None when the idempotency
    key is already taken; a NULL run id when the workflow is not as expected.
    """
    rows = execute(CREATE_RUN_SQL, params)
    return rows[0] if rows else None  # type: ignore[return-value]


# Many runs of one version, their node rows (all pending: the schedulers claim the roots of
# every run named in a notice in one statement) and their first events in one statement.
# Each run's id is drawn from the sequence before the INSERT, so a returned row names its
# item (%(ords)s) without relying on the order RETURNING gives; a run whose key is taken is
# not written (its drawn id is simply unused). Runs are inserted in key order: a key's
# index entry is held until commit, so two batches taking shared keys in opposite orders
# deadlocked (one of two concurrent 1,000-item batches, reversed, was aborted). Node rows are written run by run in graph
# order, as a lone start writes them, so ids read back in that order.
CREATE_RUNS_SQL = f"""
WITH wf AS (SELECT paused FROM workflows_workflow WHERE id = %(workflow)s),
given AS (
    SELECT nextval(pg_get_serial_sequence('workflows_run', 'id')) AS id, g.*
    FROM unnest(%(ords)s::int[], %(inputs)s::text[], %(keys)s::text[], %(hashes)s::text[], %(priorities)s::smallint[])
         AS g(ord, input, key, hash, priority)
),
run AS (
    INSERT INTO workflows_run
        (id, workflow_id, version_id, status, input, idempotency_key, request_hash, epoch, created_at, priority)
    SELECT g.id, %(workflow)s, %(version)s, CASE WHEN wf.paused THEN '{R.WAITING}' ELSE '{R.RUNNING}' END,
           g.input::jsonb, g.key, g.hash, 0, now(), g.priority
    FROM given g, wf ORDER BY g.key, g.ord
    ON CONFLICT (workflow_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id, status, created_at
),
nodes AS (
    INSERT INTO workflows_noderun
        (run_id, node_id, status, attempt, tries, queue, job_id, queued_at, worker, error, traceback)
    SELECT run.id, n.node_id, '{N.PENDING}', 0, 0, n.queue, '', NULL, '', '', ''
    FROM run, unnest(%(nodes)s::text[], %(queues)s::text[]) WITH ORDINALITY AS n(node_id, queue, pos)
    ORDER BY run.id, n.pos
),
history AS (
    INSERT INTO workflows_runevent (run_id, kind, node_id, attempt, at, worker, data)
    SELECT id, 'run.' || CASE status WHEN '{R.WAITING}' THEN 'waiting' ELSE 'started' END, '', 0, created_at, '', '{{}}'
    FROM run
)
SELECT g.ord, run.id, run.status, run.created_at FROM run JOIN given g ON g.id = run.id
"""


@performs(Cause.CREATE, nodes={None: [N.PENDING]}, runs={None: [R.RUNNING, R.WAITING]})
def create_runs(params: dict[str, Any]) -> list[tuple[int, int, str, datetime]]:
    """Write runs, their node rows and first events (CREATE_RUNS_SQL's parameters).

    Return (item ordinal, run id, status, created at) for each run written; an item whose
    idempotency key is already taken has no row.
    """
    return execute(CREATE_RUNS_SQL, params)  # type: ignore[return-value]


@performs(Cause.RESUME, runs={R.WAITING: [R.RUNNING]})
def resume_runs(run_ids: list[int]) -> int:
    """Start these waiting runs; return how many were waiting."""
    return Run.objects.filter(pk__in=run_ids, status=R.WAITING).update(status=R.RUNNING)


# --------------------------------------------------------------------------- the scheduler's claims

# Both return InputRows: 'claim' rows for the attempts they point at their jobs (with the
# run input for direct jobs, else NULL); the claim also 'output' rows for the succeeded
# predecessors of the nodes of direct jobs.
CLAIM_SQL = f"""
WITH claimed AS (
    UPDATE workflows_noderun n
    SET status = '{N.QUEUED}', attempt = n.attempt + 1, tries = n.tries + 1, queued_at = now(),
        due_at = NULL, job_id = v.job_id, worker = ''
    FROM unnest(%(ids)s::bigint[], %(job_ids)s::text[]) AS v(id, job_id), workflows_run r, {RELAXED_COMMIT}
    WHERE n.id = v.id AND n.status = %(status)s AND r.id = n.run_id
    RETURNING n.id, n.attempt, r.version_id, n.node_id, n.run_id,
              CASE WHEN n.id = ANY(%(direct)s::bigint[]) THEN {GIVEN_INPUT} END AS input, r.priority
)
SELECT 'claim', id, attempt, version_id, node_id, run_id, input, priority FROM claimed
UNION ALL
SELECT o.*, 0::smallint FROM ({upstream_outputs("SELECT run_id FROM claimed WHERE input IS NOT NULL")}) o
"""

REQUEUE_SQL = f"""
UPDATE workflows_noderun n SET queued_at = now(), job_id = v.job_id
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(job_ids)s::text[]) AS v(id, attempt, job_id),
     workflows_run r,
     {RELAXED_COMMIT}
WHERE n.id = v.id AND n.status = '{N.QUEUED}' AND n.attempt = v.attempt AND r.id = n.run_id
RETURNING 'claim', n.id, n.attempt, r.version_id, n.node_id, n.run_id, NULL::jsonb, r.priority
"""


@performs(Cause.CLAIM, nodes={N.PENDING: [N.QUEUED], N.RETRYING: [N.QUEUED]})
def claim_nodes(status: N, params: dict[str, Any]) -> list[InputRow]:
    """Give nodes still in `status` a new attempt, queued in its job (CLAIM_SQL's parameters).

    One autocommit statement with a relaxed commit.
    """
    check_move(Cause.CLAIM, status, N.QUEUED)
    return rows_of(InputRow, execute(CLAIM_SQL, {**params, "status": status}))


@performs(Cause.REQUEUE, nodes={N.QUEUED: [N.QUEUED]})
def requeue_attempts(params: dict[str, Any]) -> list[InputRow]:
    """Point queued attempts (same attempt) at new jobs (REQUEUE_SQL's parameters)."""
    return rows_of(InputRow, execute(REQUEUE_SQL, params))


# --------------------------------------------------------------------------- the worker's start and finish

# Start the attempts and read their predecessors' outputs in one round trip.
# `status || ''` keeps the planner off the status indexes, which at rest hold no queued
# node or running run: a plan cached then would scan every queued row under load; these
# statements are driven by primary keys.
START_SQL = f"""
WITH claimed AS (
    UPDATE workflows_noderun n SET status = '{N.RUNNING}', worker = %(worker)s, started_at = now()
    FROM unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS v(id, attempt), workflows_run r, {RELAXED_COMMIT}
    WHERE n.id = ANY(%(ids)s::bigint[]) AND n.id = v.id AND n.attempt = v.attempt AND n.status || '' = '{N.QUEUED}'
      AND r.id = n.run_id AND r.status || '' IN ('{R.RUNNING}', '{R.COMPENSATING}')
    RETURNING n.id, n.attempt, r.version_id, n.node_id, n.run_id, {GIVEN_INPUT} AS input
)
SELECT 'claim', id, attempt, version_id, node_id, run_id, input FROM claimed
UNION ALL
{upstream_outputs("SELECT run_id FROM claimed")}
"""

# The results travel as one JSON document: psycopg adapting ten arrays element by element
# cost the worker more CPU than the rest of the statement (profiled).
FINISH_SQL = f"""
WITH v AS (
    SELECT * FROM json_to_recordset(%(results)s::json) AS v(
        id bigint, attempt int, status text, output text, error text, traceback text,
        started_at timestamptz, finished_at timestamptz, span json, from_status text
    )
), done AS (
    UPDATE workflows_noderun n
    SET status = v.status, output = v.output::jsonb, error = v.error, traceback = v.traceback,
        started_at = v.started_at, finished_at = v.finished_at, worker = %(worker)s
    FROM v
    WHERE n.id = ANY(%(ids)s::bigint[]) AND n.id = v.id AND n.attempt = v.attempt AND n.status || '' = v.from_status
    RETURNING n.id, n.run_id, n.node_id, n.attempt, n.worker, n.started_at, n.finished_at, n.status, v.span
), history AS (
    INSERT INTO workflows_runevent (run_id, kind, node_id, attempt, at, started_at, worker, data)
    SELECT run_id, 'node.attempt', node_id, attempt, finished_at, started_at, worker, span::jsonb FROM done
)
SELECT DISTINCT 'run', run_id, 0::bigint, '', '', 0, 0::bigint, 0 FROM done
UNION ALL
SELECT 'node', n.id, n.run_id, n.node_id, coalesce(d.status, n.status), n.tries, r.version_id, r.epoch
FROM workflows_run r JOIN workflows_noderun n ON n.run_id = r.id LEFT JOIN done d ON d.id = n.id
WHERE r.id = ANY(%(small_runs)s::bigint[]) AND r.id IN (SELECT run_id FROM done) AND r.status || '' = '{R.RUNNING}'
  AND NOT EXISTS (
      SELECT FROM workflows_noderun o
      WHERE o.run_id = r.id AND o.status || '' IN ('{N.QUEUED}', '{N.RUNNING}') AND o.id NOT IN (SELECT id FROM done)
  )
"""


@performs(Cause.START, nodes={N.QUEUED: [N.RUNNING]})
def start_attempts(worker: str, ids: list[int], attempts: list[int], upstream: list[str]) -> list[InputRow]:
    """Move queued attempts (ids, attempts) of running (or compensating) runs to running on `worker`.

    Return a 'claim' row per attempt started (stale, duplicate or cancelled ones are left
    out), with its input, and an 'output' row per succeeded node of their runs among `upstream`.
    """
    params = {"worker": worker, "ids": ids, "attempts": attempts, "upstream": upstream}
    return rows_of(InputRow, execute(START_SQL, params))


@performs(Cause.FINISH, nodes={N.RUNNING: [N.SUCCEEDED, N.FAILED], N.QUEUED: [N.SUCCEEDED, N.FAILED]})
def finish_attempts(
    results: list[dict[str, Any]], worker: str, small_runs: Iterable[int]
) -> tuple[list[int], list[NodeRow]]:
    """Store attempts' results (FINISH_SQL's rows), each only if still in its `from_status`.

    Return the runs whose nodes finished here, and the NodeRows of those of `small_runs`
    that have no other node queued or running.
    """
    for result in results:
        check_move(Cause.FINISH, N(result["from_status"]), N(result["status"]))
    params = {
        "results": json.dumps(results),
        "ids": [result["id"] for result in results],
        "worker": worker,
        "small_runs": list(small_runs),
    }
    rows = execute(FINISH_SQL, params)
    return [row[1] for row in rows if row[0] == "run"], [
        NodeRow(*row[1:]) for row in rows if row[0] == "node"
    ]


# --------------------------------------------------------------------------- the scheduler's decisions


@performs(Cause.SKIP, nodes={N.PENDING: [N.SKIPPED, N.UPSTREAM_FAILED]})
def skip_nodes(skips: Sequence[Skip]) -> None:
    """Mark pending nodes skipped or upstream_failed, with their history events."""
    for _, status in skips:
        check_move(Cause.SKIP, N.PENDING, N(status))
    execute(
        f"""WITH done AS (
               UPDATE workflows_noderun n SET status = v.status, finished_at = clock_timestamp()
               FROM unnest(%s::bigint[], %s::text[]) AS v(id, status), {RELAXED_COMMIT}
               WHERE n.id = v.id AND n.status = '{N.PENDING}'
               RETURNING n.run_id, n.node_id, n.status
           )
           INSERT INTO workflows_runevent (run_id, kind, node_id, attempt, at, worker, data)
           SELECT run_id, 'node.' || status, node_id, 0, clock_timestamp(), '', '{{}}' FROM done""",
        [[s[0] for s in skips], [s[1] for s in skips]],
    )


@performs(Cause.RETRY, nodes={N.FAILED: [N.RETRYING]})
def schedule_retries(retries: Sequence[Retry]) -> None:
    """Make failed nodes wait for their backoff, with their history events."""
    execute(
        f"""WITH done AS (
               UPDATE workflows_noderun n
               SET status = '{N.RETRYING}', due_at = now() + v.delay * interval '1 second'
               FROM unnest(%s::bigint[], %s::int[], %s::float8[]) AS v(id, tries, delay),
                    {RELAXED_COMMIT}
               WHERE n.id = v.id AND n.status = '{N.FAILED}' AND n.tries = v.tries
               RETURNING n.run_id, n.node_id, n.attempt, v.delay
           )
           INSERT INTO workflows_runevent (run_id, kind, node_id, attempt, at, worker, data)
           SELECT run_id, 'node.retry_scheduled', node_id, attempt, clock_timestamp(), '',
                  jsonb_build_object('delay_seconds', round(delay::numeric, 3))
           FROM done""",
        [[r[0] for r in retries], [r[1] for r in retries], [r[2] for r in retries]],
    )


@performs(Cause.DEAD, nodes={N.FAILED: [N.DEAD]})
def mark_dead(kills: Sequence[Kill]) -> list[int]:
    """Mark failed nodes dead; return the ids of those that were still failed at those tries."""
    rows = execute(
        f"""UPDATE workflows_noderun n SET status = '{N.DEAD}', finished_at = now()
           FROM unnest(%s::bigint[], %s::int[]) AS v(id, tries)
           WHERE n.id = v.id AND n.status = '{N.FAILED}' AND n.tries = v.tries
           RETURNING n.id""",
        [[k[0] for k in kills], [k[1] for k in kills]],
    )
    return [row[0] for row in rows]


@performs(Cause.FINISH, runs={R.RUNNING: [R.SUCCEEDED, R.FAILED]})
def finish_runs(finishes: Sequence[FinishRun]) -> list[tuple[int, str]]:
    """End running runs still at the decision's epoch, with their history events; return
    (run id, status) of those ended."""
    for _, _, status in finishes:
        if not can_move_run(Cause.FINISH, R.RUNNING, R(status)):
            raise ValueError(f"A run cannot finish {status}.")
    rows = execute(
        f"""WITH done AS (
               UPDATE workflows_run r SET status = v.status, finished_at = clock_timestamp()
               FROM unnest(%s::bigint[], %s::int[], %s::text[]) AS v(id, epoch, status)
               WHERE r.id = v.id AND r.status = '{R.RUNNING}' AND r.epoch = v.epoch
               RETURNING r.id, r.status, r.finished_at
           )
           INSERT INTO workflows_runevent (run_id, kind, node_id, attempt, at, worker, data)
           SELECT id, 'run.' || status, '', 0, finished_at, '', '{{}}' FROM done
           RETURNING run_id, kind""",
        [[f[0] for f in finishes], [f[1] for f in finishes], [f[2] for f in finishes]],
    )
    return [(run_id, kind.removeprefix("run.")) for run_id, kind in rows]


# --------------------------------------------------------------------------- waiting nodes
# A wait node holds no job and no worker: its kind's claim moves it from pending (or from
# retrying, after a failed attempt's backoff) to waiting, as a new attempt; a decision, an
# event or a deadline moves it on, each guarded by `status = 'waiting'` and the attempt, so
# two schedulers firing one deadline, or a decision racing a timeout, change it once.


class Awake(NamedTuple):
    """A waiting attempt leaving `waiting`: to `status` with `output` (JSON text) or `error`."""

    noderun_id: int
    attempt: int
    status: str
    output: str | None = None
    error: str = ""


# A run counts its waiting nodes (`waiting_nodes`), in the statement that moves them: the
# reconciler's stalled-run scan skips runs with any, by a partial index, so that its work per
# second does not grow with the number of runs waiting on people, events or timers.
COUNT_WAITS = """
counted AS (
    UPDATE workflows_run r SET waiting_nodes = r.waiting_nodes {sign} c.n
    FROM (SELECT run_id, count(*) AS n FROM moved GROUP BY run_id) AS c WHERE r.id = c.run_id
)"""

ENTER_WAIT_SQL = f"""
WITH moved AS (
UPDATE workflows_noderun n
SET status = '{N.WAITING}', attempt = n.attempt + 1, tries = n.tries + 1, queued_at = now(), started_at = now(),
    finished_at = NULL, due_at = v.due_at, job_id = '', worker = '', error = '', traceback = ''
FROM unnest(%(ids)s::bigint[], %(due)s::timestamptz[]) AS v(id, due_at)
WHERE n.id = v.id AND n.status = %(status)s
RETURNING n.id, n.run_id, n.node_id, n.attempt, n.started_at
), {COUNT_WAITS.format(sign="+")}
SELECT id, run_id, node_id, attempt, started_at FROM moved
"""

LEAVE_WAIT_SQL = f"""
WITH moved AS (
UPDATE workflows_noderun n
SET status = v.status, output = v.output::jsonb, error = v.error, finished_at = now(), due_at = NULL
FROM json_to_recordset(%(rows)s::json) AS v(id bigint, attempt int, status text, output text, error text)
WHERE n.id = v.id AND n.attempt = v.attempt AND n.status = '{N.WAITING}' {{guard}}
RETURNING n.id, n.run_id, n.node_id, n.attempt, n.status, n.started_at, n.finished_at
), {COUNT_WAITS.format(sign="-")}
SELECT id, run_id, node_id, attempt, status, started_at, finished_at FROM moved
"""
DECIDE_SQL = LEAVE_WAIT_SQL.format(guard="")
EVENT_SQL = DECIDE_SQL
# Only a deadline that has passed by the database's clock fires: the one clock every scheduler shares.
EXPIRE_SQL = LEAVE_WAIT_SQL.format(guard="AND n.due_at <= now()")


def leave_wait(cause: N | Cause, sql: str, rows: Sequence[Awake]) -> list[tuple[Any, ...]]:
    for row in rows:
        check_move(Cause(cause), N.WAITING, N(row.status))
    return execute(sql, {"rows": json.dumps([row._asdict() | {"id": row.noderun_id} for row in rows])})


@performs(Cause.WAIT, nodes={N.PENDING: [N.WAITING], N.RETRYING: [N.WAITING]})
def enter_waits(
    status: N, ids: list[int], due: list[datetime | None]
) -> list[tuple[int, int, str, int, datetime]]:
    """Make ready wait nodes, still in `status`, wait as a new attempt until `due` (their next
    deadline, or None); return (row id, run id, node id, attempt, since) of those moved."""
    check_move(Cause.WAIT, status, N.WAITING)
    return execute(ENTER_WAIT_SQL, {"ids": ids, "due": due, "status": status})  # type: ignore[return-value]


@performs(Cause.DECIDE, nodes={N.WAITING: [N.SUCCEEDED]})
def decide_waits(rows: Sequence[Awake]) -> list[tuple[Any, ...]]:
    """Store decisions as the outputs of waiting approvals; return the rows changed."""
    return leave_wait(Cause.DECIDE, DECIDE_SQL, rows)


@performs(Cause.EVENT, nodes={N.WAITING: [N.SUCCEEDED]})
def wake_waits(rows: Sequence[Awake]) -> list[tuple[Any, ...]]:
    """Store an event's payload as the output of the waiting nodes it wakes; return those changed."""
    return leave_wait(Cause.EVENT, EVENT_SQL, rows)


@performs(Cause.EXPIRE, nodes={N.WAITING: [N.SUCCEEDED, N.FAILED]})
def expire_waits(rows: Sequence[Awake]) -> list[tuple[Any, ...]]:
    """Move waiting nodes whose deadline has passed on (a timer's end, a timeout's policy)."""
    return leave_wait(Cause.EXPIRE, EXPIRE_SQL, rows)


# --------------------------------------------------------------------------- child runs
# A workflow.run node enters `waiting` like a wait node (enter_waits, in the transaction that
# creates its child run) and leaves it when the child run ends, in the transaction that ends
# the child (workflows/childlinks.py), guarded by `status = 'waiting'` and the attempt.
CHILD_SQL = DECIDE_SQL


@performs(Cause.CHILD, nodes={N.WAITING: [N.SUCCEEDED, N.FAILED]})
def settle_children(rows: Sequence[Awake]) -> list[tuple[Any, ...]]:
    """Store child runs' ends as their parent nodes' results; return the rows changed."""
    return leave_wait(Cause.CHILD, CHILD_SQL, rows)


# An agent (llm.agent) calling a workflow as a tool (workflows/agenttools.py): its running
# attempt waits, in the transaction that records the call and creates the child run; the
# child's end (same transaction as childlinks) queues the same attempt again with a new job,
# to go on from its recorded steps. A retry budget is spent only by failures, never by calls.
PARK_SQL = f"""
WITH moved AS (
UPDATE workflows_noderun n SET status = '{N.WAITING}', due_at = NULL, job_id = ''
WHERE n.id = %(id)s AND n.attempt = %(attempt)s AND n.status = '{N.RUNNING}'
RETURNING n.id, n.run_id
), {COUNT_WAITS.format(sign="+")}
SELECT id FROM moved
"""

RESUME_SQL = f"""
WITH moved AS (
UPDATE workflows_noderun n SET status = '{N.QUEUED}', queued_at = now(), job_id = v.job_id, worker = ''
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(job_ids)s::text[]) AS v(id, attempt, job_id)
WHERE n.id = v.id AND n.attempt = v.attempt AND n.status = '{N.WAITING}'
RETURNING n.id, n.run_id, n.attempt, n.node_id
), {COUNT_WAITS.format(sign="-")}
SELECT 'claim', m.id, m.attempt, r.version_id, m.node_id, m.run_id, NULL::jsonb, r.priority
FROM moved m JOIN workflows_run r ON r.id = m.run_id
"""


@performs(Cause.CALL, nodes={N.RUNNING: [N.WAITING]})
def park_agent(noderun_id: int, attempt: int) -> bool:
    """Make a running agent attempt wait for the child run its tool call started; return
    whether it was still running at that attempt."""
    return bool(execute(PARK_SQL, {"id": noderun_id, "attempt": attempt}))


@performs(Cause.CHILD, nodes={N.WAITING: [N.QUEUED]})
def resume_agents(params: dict[str, Any]) -> list[InputRow]:
    """Queue waiting agent attempts (ids, attempts; same attempt) in new jobs (job_ids)
    once their tool call's child run has ended; return a 'claim' row per attempt moved."""
    return rows_of(InputRow, execute(RESUME_SQL, params))


# --------------------------------------------------------------------------- compensation (sagas)
# In the transaction that fails or cancels a run (workflows/sagas.py), a run with nodes to
# undo starts compensating and its steps' rows are written pending; the steps then move as
# tasks (claim, start, finish, retry, dead); the run's end is a conditional UPDATE too.

BEGIN_COMPENSATION_SQL = f"""
UPDATE workflows_run r SET status = '{R.COMPENSATING}', finished_at = NULL
WHERE r.id = %(run)s AND r.status IN ('{R.FAILED}', '{R.CANCELLED}')
RETURNING r.id
"""

CREATE_STEPS_SQL = f"""
INSERT INTO workflows_noderun (run_id, node_id, status, attempt, tries, queue, job_id, worker, error, traceback)
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
def end_compensations(ends: Sequence[tuple[int, str]]) -> list[tuple[int, str]]:
    """End compensating runs as (run id, compensated or compensation_failed), with their
    history events; return those ended."""
    for _, status in ends:
        if not can_move_run(Cause.COMPENSATE, R.COMPENSATING, R(status)):
            raise ValueError(f"A compensating run cannot end {status}.")
    rows = execute(
        f"""WITH done AS (
               UPDATE workflows_run r SET status = v.status, finished_at = clock_timestamp()
               FROM unnest(%s::bigint[], %s::text[]) AS v(id, status)
               WHERE r.id = v.id AND r.status = '{R.COMPENSATING}'
               RETURNING r.id, r.status, r.finished_at
           )
           INSERT INTO workflows_runevent (run_id, kind, node_id, attempt, at, worker, data)
           SELECT id, 'run.' || status, '', 0, finished_at, '', '{{}}' FROM done
           RETURNING run_id, kind""",
        [[run_id for run_id, _ in ends], [status for _, status in ends]],
    )
    return [(run_id, kind.removeprefix("run.")) for run_id, kind in rows]


# --------------------------------------------------------------------------- the reconciler

# An attempt lost with its worker is the platform's failure, not the handler's: it is given
# back to the retry budget (`tries` - 1, so even a node with max_attempts 1 runs again), at
# most FREE_LOST_ATTEMPTS times per node (`lost`), so a handler that kills its worker (OOM)
# still ends dead. An attempt that overran its timeout unreported counts like any failure.
LOST_SQL = """
UPDATE {table} t SET status = '{failed}', error = v.error, traceback = '',
  tries = t.tries - (v.free AND t.lost < %(cap)s)::int, lost = t.lost + (v.free AND t.lost < %(cap)s)::int
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(errors)s::text[], %(free)s::bool[])
  AS v(id, attempt, error, free)
WHERE t.id = v.id AND t.attempt = v.attempt AND t.status = '{running}'
RETURNING {returning}
"""


def lost_params(lost: Sequence[Lost]) -> dict[str, Any]:
    return {
        "cap": settings.SWITCHYARD["FREE_LOST_ATTEMPTS"],
        "ids": [x.noderun_id for x in lost],
        "attempts": [x.attempt for x in lost],
        "errors": [x.error for x in lost],
        "free": [x.free for x in lost],
    }


@performs(Cause.LOST, nodes={N.RUNNING: [N.FAILED]})
def fail_lost(lost: Sequence[Lost]) -> list[tuple[int, str, int, str]]:
    """Fail running attempts whose worker is gone; return (run id, node id, attempt, worker)."""
    sql = LOST_SQL.format(
        table="workflows_noderun",
        failed=N.FAILED,
        running=N.RUNNING,
        returning="t.run_id, t.node_id, t.attempt, t.worker",
    )
    return execute(sql, lost_params(lost))  # type: ignore[return-value]


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
    if not node.update(status=N.PENDING, tries=0, finished_at=None, due_at=None, **edits):
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


# --------------------------------------------------------------------------- map items
# A map node (core/maps.py, runtime/mapping.py) waits while its items run: each item is a
# MapItem row that moves by the node table as a task's attempts do, guarded likewise by its
# status and attempt. Everything that claims items or finishes the map node first locks the
# run row (`lock_map`), as a cancel and a replay do: claims of one map never overlap, so
# `max_parallel` holds, and a cancel never meets a half-made claim.

LOCK_MAP_SQL = f"""
SELECT r.id FROM workflows_run r WHERE r.id = %(run)s AND r.status = '{R.RUNNING}' FOR NO KEY UPDATE
"""

MAP_NODE_SQL = f"""
SELECT n.run_id, r.version_id, n.node_id, n.attempt FROM workflows_noderun n JOIN workflows_run r ON r.id = n.run_id
WHERE n.id = %(id)s AND n.status = '{N.WAITING}'
"""


class MapNode(NamedTuple):
    """A waiting map node, locked for its next step."""

    noderun_id: int
    run_id: int
    version_id: int
    node_id: str
    attempt: int


class ItemRow(NamedTuple):
    """An item started: what its handler is given."""

    item_id: int
    attempt: int
    noderun_id: int
    run_id: int
    index: int
    value: Any


def lock_map(noderun_id: int, run_id: int) -> MapNode | None:
    """Lock the run of a map node (inside a transaction); the node, if both still go on."""
    if not execute(LOCK_MAP_SQL, {"run": run_id}):
        return None
    rows = execute(MAP_NODE_SQL, {"id": noderun_id})  # read after the lock: a fresh snapshot
    return MapNode(noderun_id, *rows[0]) if rows else None


INSERT_ITEMS_SQL = f"""
INSERT INTO workflows_mapitem
    (node_run_id, run_id, index, status, item, attempt, tries, job_id, worker, error, traceback)
SELECT %(id)s, %(run)s, i.ord - 1, '{N.PENDING}', i.value, 0, 0, '', '', '', ''
FROM jsonb_array_elements(%(items)s::jsonb) WITH ORDINALITY AS i(value, ord)
"""


@performs(Cause.CREATE, nodes={None: [N.PENDING]})
def insert_items(noderun_id: int, run_id: int, items_json: str) -> None:
    """Write a map node's items, pending, in one statement (a JSON array of up to MAX_ITEMS)."""
    execute(INSERT_ITEMS_SQL, {"id": noderun_id, "run": run_id, "items": items_json})


IN_FLIGHT_SQL = f"""
SELECT count(*) FROM workflows_mapitem i
WHERE i.node_run_id = %(id)s AND i.status IN ('{N.QUEUED}', '{N.RUNNING}', '{N.FAILED}')
"""

# Served by mapitem_open_idx in item order: it skips at most the items in flight and those
# waiting for a backoff, however many items the map has.
PICK_ITEMS_SQL = f"""
SELECT i.id FROM workflows_mapitem i
WHERE i.node_run_id = %(id)s
  AND i.status IN ('{N.PENDING}', '{N.RETRYING}', '{N.QUEUED}', '{N.RUNNING}', '{N.FAILED}')
  AND (i.status = '{N.PENDING}' OR (i.status = '{N.RETRYING}' AND i.due_at <= now()))
ORDER BY i.index LIMIT %(limit)s
FOR UPDATE SKIP LOCKED
"""

OPEN_ITEMS_SQL = f"""
SELECT EXISTS (SELECT FROM workflows_mapitem i WHERE i.node_run_id = %(id)s
  AND i.status IN ('{N.PENDING}', '{N.RETRYING}', '{N.QUEUED}', '{N.RUNNING}', '{N.FAILED}'))
"""


def free_slots(node: MapNode, max_parallel: int) -> int:
    return max_parallel - int(execute(IN_FLIGHT_SQL, {"id": node.noderun_id})[0][0])


def pick_items(node: MapNode, limit: int) -> list[int]:
    """The ids of up to `limit` items due to run next, in item order."""
    return [row[0] for row in execute(PICK_ITEMS_SQL, {"id": node.noderun_id, "limit": limit})]


def has_open_items(noderun_id: int) -> bool:
    return bool(execute(OPEN_ITEMS_SQL, {"id": noderun_id})[0][0])


CLAIM_ITEMS_SQL = f"""
UPDATE workflows_mapitem i
SET status = '{N.QUEUED}', attempt = i.attempt + 1, tries = i.tries + 1, queued_at = now(), due_at = NULL,
    job_id = v.job_id, worker = ''
FROM unnest(%(ids)s::bigint[], %(job_ids)s::text[]) AS v(id, job_id)
WHERE i.id = v.id AND (i.status = '{N.PENDING}' OR i.status = '{N.RETRYING}')
RETURNING i.id, i.attempt, i.job_id
"""

REQUEUE_ITEMS_SQL = f"""
UPDATE workflows_mapitem i SET queued_at = now(), job_id = v.job_id
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(job_ids)s::text[]) AS v(id, attempt, job_id)
WHERE i.id = v.id AND i.attempt = v.attempt AND i.status = '{N.QUEUED}'
RETURNING i.id, i.attempt, i.job_id
"""


@performs(Cause.CLAIM, nodes={N.PENDING: [N.QUEUED], N.RETRYING: [N.QUEUED]})
def claim_items(ids: list[int], job_ids: list[str]) -> list[tuple[int, int, str]]:
    """Give items a new attempt, queued in its job (under `lock_map`); return (id, attempt, job id) each."""
    return execute(CLAIM_ITEMS_SQL, {"ids": ids, "job_ids": job_ids})  # type: ignore[return-value]


@performs(Cause.REQUEUE, nodes={N.QUEUED: [N.QUEUED]})
def requeue_items(ids: list[int], attempts: list[int], job_ids: list[str]) -> list[tuple[int, int, str]]:
    """Point queued items (same attempt) at new jobs; return (id, attempt, job id) each."""
    params = {"ids": ids, "attempts": attempts, "job_ids": job_ids}
    return execute(REQUEUE_ITEMS_SQL, params)  # type: ignore[return-value]


START_ITEMS_SQL = f"""
UPDATE workflows_mapitem i SET status = '{N.RUNNING}', worker = %(worker)s, started_at = clock_timestamp()
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS v(id, attempt), workflows_run r, {RELAXED_COMMIT}
WHERE i.id = v.id AND i.attempt = v.attempt AND i.status = '{N.QUEUED}'
  AND r.id = i.run_id AND r.status = '{R.RUNNING}'
RETURNING i.id, i.attempt, i.node_run_id, i.run_id, i.index, i.item
"""

FINISH_ITEMS_SQL = f"""
UPDATE workflows_mapitem i
SET status = v.status, output = v.output::jsonb, error = v.error, traceback = v.traceback,
    started_at = v.started_at, finished_at = v.finished_at
FROM json_to_recordset(%(results)s::json) AS v(
    id bigint, attempt int, status text, output text, error text, traceback text,
    started_at timestamptz, finished_at timestamptz
)
WHERE i.id = v.id AND i.attempt = v.attempt AND i.status = '{N.RUNNING}'
RETURNING i.node_run_id, i.run_id
"""


@performs(Cause.START, nodes={N.QUEUED: [N.RUNNING]})
def start_items(worker: str, ids: list[int], attempts: list[int]) -> list[ItemRow]:
    """Move queued items of running runs to running on `worker`; return those started."""
    rows = execute(START_ITEMS_SQL, {"worker": worker, "ids": ids, "attempts": attempts})
    return rows_of(ItemRow, rows)


@performs(Cause.FINISH, nodes={N.RUNNING: [N.SUCCEEDED, N.FAILED]})
def finish_items(results: list[dict[str, Any]]) -> set[tuple[int, int]]:
    """Store items' results, each only if still running at its attempt; return the
    (map node, run) pairs of those stored."""
    for result in results:
        check_move(Cause.FINISH, N.RUNNING, N(result["status"]))
    return {(row[0], row[1]) for row in execute(FINISH_ITEMS_SQL, {"results": json.dumps(results)})}


FAILED_ITEMS_SQL = f"""
SELECT i.id, i.tries FROM workflows_mapitem i
WHERE i.node_run_id = %(id)s AND i.status = '{N.FAILED}'
"""


def failed_items(noderun_id: int) -> list[tuple[int, int]]:
    """(item id, tries) of the map node's failed items, awaiting a retry or death."""
    return execute(FAILED_ITEMS_SQL, {"id": noderun_id})  # type: ignore[return-value]


@performs(Cause.RETRY, nodes={N.FAILED: [N.RETRYING]})
def retry_items(retries: Sequence[Retry]) -> None:
    """Make failed items wait for their backoff."""
    execute(
        f"""UPDATE workflows_mapitem i
            SET status = '{N.RETRYING}', due_at = now() + v.delay * interval '1 second'
            FROM unnest(%s::bigint[], %s::int[], %s::float8[]) AS v(id, tries, delay)
            WHERE i.id = v.id AND i.status = '{N.FAILED}' AND i.tries = v.tries""",
        [[r[0] for r in retries], [r[1] for r in retries], [r[2] for r in retries]],
    )


@performs(Cause.DEAD, nodes={N.FAILED: [N.DEAD]})
def kill_items(kills: Sequence[Kill]) -> list[int]:
    """Mark failed items dead; return the ids of those still failed at those tries."""
    rows = execute(
        f"""UPDATE workflows_mapitem i SET status = '{N.DEAD}', finished_at = now()
            FROM unnest(%s::bigint[], %s::int[]) AS v(id, tries)
            WHERE i.id = v.id AND i.status = '{N.FAILED}' AND i.tries = v.tries
            RETURNING i.id""",
        [[k[0] for k in kills], [k[1] for k in kills]],
    )
    return [row[0] for row in rows]


@performs(Cause.LOST, nodes={N.RUNNING: [N.FAILED]})
def fail_lost_items(lost: Sequence[Lost]) -> list[tuple[int, int]]:
    """Fail running items whose worker is gone; return (map node, run) of each."""
    sql = LOST_SQL.format(
        table="workflows_mapitem", failed=N.FAILED, running=N.RUNNING, returning="t.node_run_id, t.run_id"
    )
    return execute(sql, lost_params(lost))  # type: ignore[return-value]


GATHER_SQL = f"""
WITH moved AS (
UPDATE workflows_noderun n
SET status = %(status)s, output = %(output)s::jsonb, error = %(error)s, finished_at = now(), due_at = NULL
WHERE n.id = %(id)s AND n.attempt = %(attempt)s AND n.status = '{N.WAITING}'
RETURNING n.id, n.run_id, n.node_id, n.attempt, n.status, n.started_at, n.finished_at
), {COUNT_WAITS.format(sign="-")},
history AS (
    INSERT INTO workflows_runevent (run_id, kind, node_id, attempt, at, started_at, worker, data)
    SELECT run_id, 'node.attempt', node_id, attempt, finished_at, started_at, '', %(span)s::jsonb FROM moved
)
SELECT id, run_id FROM moved
"""


@performs(Cause.GATHER, nodes={N.WAITING: [N.SUCCEEDED, N.DEAD, N.FAILED]})
def gather_map(node: MapNode, status: N, output: str | None, error: str, span: dict[str, Any]) -> bool:
    """End a waiting map node at its attempt: succeeded with its items' outputs (JSON text),
    dead by a dead item, or failed (its list could not be computed); return whether it moved."""
    check_move(Cause.GATHER, N.WAITING, status)
    params = {
        "id": node.noderun_id,
        "attempt": node.attempt,
        "status": status,
        "output": output,
        "error": error,
        "span": json.dumps(span),
    }
    return bool(execute(GATHER_SQL, params))


@performs(
    Cause.REPLAY,
    nodes={N.DEAD: [N.RETRYING, N.WAITING], N.UPSTREAM_FAILED: [N.PENDING]},
    runs={s: [R.RUNNING] for s in (R.RUNNING, R.FAILED, R.SUCCEEDED)},
)
def replay_item(run: Run, item_id: int, resets: list[str], edits: dict[str, Any]) -> bool:
    """Make a dead item due again (retrying, due now, fresh retry budget, `edits` applied); its map node,
    if dead, back to waiting with its upstream_failed descendants `resets` pending; the run
    (locked by the caller) running at a new epoch.

    Return whether the item was dead and its map node dead or waiting; nothing changes
    otherwise (the caller's transaction is rolled back).
    """
    item = MapItem.objects.filter(pk=item_id, status=N.DEAD).first()
    if item is None:
        return False
    parent = NodeRun.objects.filter(pk=item.node_run_id)
    if parent.filter(status=N.DEAD).update(status=N.WAITING, finished_at=None, output=None, error=""):
        Run.objects.filter(pk=run.pk).update(waiting_nodes=orm.F("waiting_nodes") + 1)
    elif not parent.filter(status=N.WAITING).exists():
        return False
    # Due at once: the schedulers' housekeeping claims it as an item whose backoff expired.
    MapItem.objects.filter(pk=item_id, status=N.DEAD).update(
        status=N.RETRYING, tries=0, finished_at=None, due_at=timezone.now(), **edits
    )
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
        status=N.PENDING, tries=0, output=None, error="", traceback="", finished_at=None, due_at=None
    )
    if changed != len(node_ids):
        return False
    run.status, run.finished_at, run.epoch = R.RUNNING, None, run.epoch + 1
    return True
