"""The status changes of nodes that wait (the wait lifecycle), with transitions.py.

Wait nodes (approvals, events, timers), child-run nodes and agents calling a workflow as a
tool hold no job and no worker while they wait; each statement here moves them into or out
of `waiting` and counts the run's waiting nodes in the same statement (lifecycle.COUNT_WAITS).
Callers reach these functions through `transitions` (re-exported there).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from workflows.core.states import Cause, NodeStatus as N
from workflows.runtime.lifecycle import (
    COUNT_WAITS,
    LOCK_RUNS,
    RUNS_LOCKED,
    InputRow,
    check_move,
    execute,
    performs,
    rows_of,
)
from workflows.store.statements import NODES, RUNS

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
    retryable: bool = True  # a failure's: False kills the node without a retry


ENTER_WAIT_SQL = f"""
WITH {LOCK_RUNS.format(ids="%(ids)s::bigint[]")},
moved AS (
UPDATE {NODES} n
SET status = '{N.WAITING}', attempt = n.attempt + 1, tries = n.tries + 1, queued_at = now(), started_at = now(),
    finished_at = NULL, due_at = v.due_at, job_id = '', worker = '', error = '', traceback = ''
FROM unnest(%(ids)s::bigint[], %(due)s::timestamptz[]) AS v(id, due_at)
WHERE n.id = v.id AND n.status = %(status)s AND {RUNS_LOCKED}
RETURNING n.id, n.run_id, n.node_id, n.attempt, n.started_at
), {COUNT_WAITS.format(sign="+")}
SELECT id, run_id, node_id, attempt, started_at FROM moved
"""

LEAVE_WAIT_SQL = f"""
WITH {LOCK_RUNS.format(ids="ARRAY(SELECT x.id FROM json_to_recordset(%(rows)s::json) AS x(id bigint))")},
moved AS (
UPDATE {NODES} n
SET status = v.status, output = v.output::jsonb, error = v.error, finished_at = now(), due_at = NULL,
    retryable = coalesce(v.retryable, true)
FROM json_to_recordset(%(rows)s::json) AS v(id bigint, attempt int, status text, output text, error text, retryable bool)
WHERE n.id = v.id AND n.attempt = v.attempt AND n.status = '{N.WAITING}' AND {RUNS_LOCKED} {{guard}}
RETURNING n.id, n.run_id, n.node_id, n.attempt, n.status, n.started_at, n.finished_at
), {COUNT_WAITS.format(sign="-")}
SELECT id, run_id, node_id, attempt, status, started_at, finished_at FROM moved
"""
DECIDE_SQL = LEAVE_WAIT_SQL.format(guard="")
EVENT_SQL = DECIDE_SQL
# Only a deadline that has passed by the database's clock fires: the one clock every scheduler shares.
EXPIRE_SQL = LEAVE_WAIT_SQL.format(guard="AND n.due_at <= now()")


class Left(NamedTuple):
    """A node that left its wait (LEAVE_WAIT_SQL's rows)."""

    noderun_id: int
    run_id: int
    node_id: str
    attempt: int
    status: str
    started_at: datetime | None
    finished_at: datetime


class EnteredWait(NamedTuple):
    """A node that began to wait (ENTER_WAIT_SQL's rows)."""

    noderun_id: int
    run_id: int
    node_id: str
    attempt: int
    since: datetime


def leave_wait(cause: N | Cause, sql: str, rows: Sequence[Awake]) -> list[Left]:
    for row in rows:
        check_move(Cause(cause), N.WAITING, N(row.status))
    params = {"rows": json.dumps([row._asdict() | {"id": row.noderun_id} for row in rows])}
    return rows_of(Left, execute(sql, params))


@performs(Cause.WAIT, nodes={N.PENDING: [N.WAITING], N.RETRYING: [N.WAITING]})
def enter_waits(status: N, ids: list[int], due: list[datetime | None]) -> list[EnteredWait]:
    """Make ready wait nodes, still in `status`, wait as a new attempt until `due` (their next
    deadline, or None); return those moved."""
    check_move(Cause.WAIT, status, N.WAITING)
    return rows_of(EnteredWait, execute(ENTER_WAIT_SQL, {"ids": ids, "due": due, "status": status}))


@performs(Cause.DECIDE, nodes={N.WAITING: [N.SUCCEEDED]})
def decide_waits(rows: Sequence[Awake]) -> list[Left]:
    """Store decisions as the outputs of waiting approvals; return the rows changed."""
    return leave_wait(Cause.DECIDE, DECIDE_SQL, rows)


@performs(Cause.EVENT, nodes={N.WAITING: [N.SUCCEEDED]})
def wake_waits(rows: Sequence[Awake]) -> list[Left]:
    """Store an event's payload as the output of the waiting nodes it wakes; return those changed."""
    return leave_wait(Cause.EVENT, EVENT_SQL, rows)


@performs(Cause.EXPIRE, nodes={N.WAITING: [N.SUCCEEDED, N.FAILED]})
def expire_waits(rows: Sequence[Awake]) -> list[Left]:
    """Move waiting nodes whose deadline has passed on (a timer's end, a timeout's policy)."""
    return leave_wait(Cause.EXPIRE, EXPIRE_SQL, rows)


# --------------------------------------------------------------------------- child runs
# A workflow.run node enters `waiting` like a wait node (enter_waits, in the transaction that
# creates its child run) and leaves it when the child run ends, in the transaction that ends
# the child (workflows/runtime/parents.py), guarded by `status = 'waiting'` and the attempt.
CHILD_SQL = DECIDE_SQL


@performs(Cause.CHILD, nodes={N.WAITING: [N.SUCCEEDED, N.FAILED]})
def settle_children(rows: Sequence[Awake]) -> list[Left]:
    """Store child runs' ends as their parent nodes' results; return the rows changed."""
    return leave_wait(Cause.CHILD, CHILD_SQL, rows)


# An agent (llm.agent) calling a workflow as a tool (workflows/agents/tools.py): its running
# attempt waits, in the transaction that records the call and creates the child run; the
# child's end (same transaction as childlinks) queues the same attempt again with a new job,
# to go on from its recorded steps. A retry budget is spent only by failures, never by calls.
PARK_SQL = f"""
WITH {LOCK_RUNS.format(ids="ARRAY[%(id)s::bigint]")},
moved AS (
UPDATE {NODES} n SET status = '{N.WAITING}', due_at = NULL, job_id = ''
WHERE n.id = %(id)s AND n.attempt = %(attempt)s AND n.status = '{N.RUNNING}' AND {RUNS_LOCKED}
RETURNING n.id, n.run_id
), {COUNT_WAITS.format(sign="+")}
SELECT id FROM moved
"""

RESUME_SQL = f"""
WITH {LOCK_RUNS.format(ids="%(ids)s::bigint[]")},
moved AS (
UPDATE {NODES} n SET status = '{N.QUEUED}', queued_at = now(), job_id = v.job_id, worker = ''
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(job_ids)s::text[]) AS v(id, attempt, job_id)
WHERE n.id = v.id AND n.attempt = v.attempt AND n.status = '{N.WAITING}' AND {RUNS_LOCKED}
RETURNING n.id, n.run_id, n.attempt, n.node_id
), {COUNT_WAITS.format(sign="-")}
SELECT 'claim', m.id, m.attempt, r.version_id, m.node_id, m.run_id, NULL::jsonb, r.priority
FROM moved m JOIN {RUNS} r ON r.id = m.run_id
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


# --------------------------------------------------------------------------- budget holds
# An LLM call that does not fit a spend budget (workflows/budgets) holds its running attempt:
# the same statement as an agent's workflow call (no attempt spent, no worker held), in the
# transaction that records the hold; the hold's release queues the same attempt again with a
# new job, to make its call again (an agent goes on from its recorded steps).


@performs(Cause.HOLD, nodes={N.RUNNING: [N.WAITING]})
def hold_attempt(noderun_id: int, attempt: int) -> bool:
    """Make a running attempt wait on a budget; return whether it was still running at that attempt."""
    return bool(execute(PARK_SQL, {"id": noderun_id, "attempt": attempt}))


@performs(Cause.RELEASE, nodes={N.WAITING: [N.QUEUED]})
def release_held(params: dict[str, Any]) -> list[InputRow]:
    """Queue held attempts (ids, attempts; same attempt) in new jobs (job_ids); return a
    'claim' row per attempt moved."""
    return rows_of(InputRow, execute(RESUME_SQL, params))
