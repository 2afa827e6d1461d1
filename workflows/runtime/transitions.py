"""The one module family that changes the status of a node or a run: this module,
transitions_maps.py for map nodes and their items, transitions_waits.py for waiting nodes and
transitions_forks.py for forked runs (re-exported here).

Every statement that writes a status is in these two modules, and nowhere else
(tests/unit/test_transitions.py scans the tree for any other): the start of a run, the
scheduler's claims, the worker's start and finish of an attempt, skips, retries, dead nodes,
finished runs, lost attempts, and the operator's cancel, replay and resume. Each is a
conditional UPDATE (`... WHERE status = 'pending'`): two processes deciding the same thing
change one row once, and the caller learns from the rows returned what it changed. Each
function declares the moves it performs (`@performs`, lifecycle.py); every declared move is
a move of the one table, core/states.py (the test checks the table, the declarations and the
statuses spelled in each statement against one another). The attempt lifecycle (claim,
requeue, start, finish, retry, dead, lost) is written once, in lifecycle.Attempts, for a
task's attempts here and for map items in transitions_maps.py.

What a node is given (its run input, or the edited input a replay gave it, and its succeeded
predecessors' outputs) is read by one query, in two forms: joined to a claim
(`UPSTREAM_OUTPUTS`, `GIVEN_INPUT`), or alone for a dead letter (`read_inputs`). Its rows
are `InputRow`s.

The statements' texts are constants, so psycopg prepares each once per connection
(pgsession.py); statuses are spelled in the text, from the enums, never passed as
parameters where a partial index must serve the generic plan. Table names come from the
models (store/statements.py).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from workflows.core.states import NODE_TERMINAL, Cause, can_move_run
from workflows.core.states import NodeStatus as N
from workflows.core.states import RunStatus as R
from workflows.runtime.lifecycle import (  # re-exported (`x as x`): transitions.<name> for the whole family
    RELAXED_COMMIT as RELAXED_COMMIT,
)
from workflows.runtime.lifecycle import (
    Attempts as Attempts,
)
from workflows.runtime.lifecycle import (
    InputRow as InputRow,
)
from workflows.runtime.lifecycle import (
    Kill as Kill,
)
from workflows.runtime.lifecycle import (
    Lost as Lost,
)
from workflows.runtime.lifecycle import (
    Retry as Retry,
)
from workflows.runtime.lifecycle import (
    check_move as check_move,
)
from workflows.runtime.lifecycle import (
    execute as execute,
)
from workflows.runtime.lifecycle import (
    kill_params as kill_params,
)
from workflows.runtime.lifecycle import (
    lost_params as lost_params,
)
from workflows.runtime.lifecycle import (
    performs as performs,
)
from workflows.runtime.lifecycle import (
    retry_params as retry_params,
)
from workflows.runtime.lifecycle import (
    rows_of as rows_of,
)
from workflows.runtime.transitions_forks import (  # re-exported (`x as x`): transitions.<name> for the whole family
    ForkNode as ForkNode,
)
from workflows.runtime.transitions_forks import (
    create_fork as create_fork,
)
from workflows.runtime.transitions_maps import (  # re-exported (`x as x`): transitions.<name> for the whole family
    ItemRow as ItemRow,
)
from workflows.runtime.transitions_maps import (
    MapNode as MapNode,
)
from workflows.runtime.transitions_maps import (
    claim_items as claim_items,
)
from workflows.runtime.transitions_maps import (
    fail_lost_items as fail_lost_items,
)
from workflows.runtime.transitions_maps import (
    failed_items as failed_items,
)
from workflows.runtime.transitions_maps import (
    finish_items as finish_items,
)
from workflows.runtime.transitions_maps import (
    free_slots as free_slots,
)
from workflows.runtime.transitions_maps import (
    gather_map as gather_map,
)
from workflows.runtime.transitions_maps import (
    has_open_items as has_open_items,
)
from workflows.runtime.transitions_maps import (
    insert_items as insert_items,
)
from workflows.runtime.transitions_maps import (
    kill_items as kill_items,
)
from workflows.runtime.transitions_maps import (
    lock_map as lock_map,
)
from workflows.runtime.transitions_maps import (
    pick_items as pick_items,
)
from workflows.runtime.transitions_maps import (
    replay_item as replay_item,
)
from workflows.runtime.transitions_maps import (
    requeue_items as requeue_items,
)
from workflows.runtime.transitions_maps import (
    retry_items as retry_items,
)
from workflows.runtime.transitions_maps import (
    start_items as start_items,
)
from workflows.runtime.transitions_waits import (  # re-exported (`x as x`): transitions.<name> for the whole family
    Awake as Awake,
)
from workflows.runtime.transitions_waits import (
    decide_waits as decide_waits,
)
from workflows.runtime.transitions_waits import (
    enter_waits as enter_waits,
)
from workflows.runtime.transitions_waits import (
    expire_waits as expire_waits,
)
from workflows.runtime.transitions_waits import (
    hold_attempt as hold_attempt,
)
from workflows.runtime.transitions_waits import (
    park_agent as park_agent,
)
from workflows.runtime.transitions_waits import (
    release_held as release_held,
)
from workflows.runtime.transitions_waits import (
    resume_agents as resume_agents,
)
from workflows.runtime.transitions_waits import (
    settle_children as settle_children,
)
from workflows.runtime.transitions_waits import (
    wake_waits as wake_waits,
)
from workflows.store.models import MapItem, NodeRun, Run
from workflows.store.statements import EVENTS, NODES, RUNS, WORKFLOWS

NODE = Attempts(NodeRun, "n")


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
    retryable: bool = True  # a failed node's: False kills it without a retry (engine.resolve_failure)


class Skip(NamedTuple):
    noderun_id: int
    status: str  # skipped or upstream_failed


class FinishRun(NamedTuple):
    run_id: int
    epoch: int  # the snapshot's: a replay since makes the decision stale
    status: str


# --------------------------------------------------------------------------- what a node is given

GIVEN_INPUT = "coalesce(n.input_override, r.input)"  # the run input, or the replay's edited input


def upstream_outputs(runs: str) -> str:
    """The 'output' rows (InputRow) of the succeeded nodes named %(upstream)s in the runs `runs` selects."""
    return f"""SELECT 'output', u.id, u.attempt, 0::bigint, u.node_id, u.run_id, u.output FROM {NODES} u
WHERE u.run_id IN ({runs}) AND u.node_id = ANY(%(upstream)s::text[]) AND u.status = '{N.SUCCEEDED}'"""


INPUTS_SQL = f"""
WITH claimed AS (
    SELECT n.id, n.attempt, r.version_id, n.node_id, n.run_id, {GIVEN_INPUT} AS input
    FROM {NODES} n JOIN {RUNS} r ON r.id = n.run_id
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
# With %(hold)s a run is written waiting (a debounced or singleton-queued start,
# runs/startkeys.py, with its %(start_key)s and %(start_due)s).
# With %(expect_version)s and %(expect_priority)s (else NULL), the workflow must still have
# that active version and default priority (a web process read them earlier, perhaps from
# its cache): if not, nothing is written and the one row answered has a NULL id.
CREATE_RUN_SQL = f"""
WITH wf AS (
    SELECT paused FROM {WORKFLOWS}
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
def create_run(params: dict[str, Any]) -> tuple[int, str, datetime, dict[str, int]] | None:
    """Write a run, its node rows and its first event (CREATE_RUN_SQL's parameters).

    Return (run id, status, created at, node id -> row id), or None when the idempotency
    key is already taken; a NULL run id when the workflow is not as expected.
    """
    rows = execute(CREATE_RUN_SQL, params)
    return rows[0] if rows else None


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
def create_runs(params: dict[str, Any]) -> list[tuple[int, int, str, datetime]]:
    """Write runs, their node rows and first events (CREATE_RUNS_SQL's parameters).

    Return (item ordinal, run id, status, created at) for each run written; an item whose
    idempotency key is already taken has no row.
    """
    return execute(CREATE_RUNS_SQL, params)


@performs(Cause.RESUME, runs={R.WAITING: [R.RUNNING]})
def resume_runs(run_ids: list[int]) -> int:
    """Start these waiting runs; return how many were waiting."""
    return Run.objects.filter(pk__in=run_ids, status=R.WAITING).update(status=R.RUNNING)


# --------------------------------------------------------------------------- the scheduler's claims

# Both return InputRows: 'claim' rows for the attempts they point at their jobs (with the
# run input for direct jobs, else NULL); the claim also 'output' rows for the succeeded
# predecessors of the nodes of direct jobs.
CLAIMED = NODE.claim(
    "n.status = %(status)s",
    joins=f", {RUNS} r, {RELAXED_COMMIT}",
    where=" AND r.id = n.run_id",
    returning="n.id, n.attempt, r.version_id, n.node_id, n.run_id,\n"
    f"    CASE WHEN n.id = ANY(%(direct)s::bigint[]) THEN {GIVEN_INPUT} END AS input, r.priority",
)
CLAIM_SQL = f"""
WITH claimed AS (
{CLAIMED}
)
SELECT 'claim', id, attempt, version_id, node_id, run_id, input, priority FROM claimed
UNION ALL
SELECT o.*, 0::smallint FROM ({upstream_outputs("SELECT run_id FROM claimed WHERE input IS NOT NULL")}) o
"""

REQUEUE_SQL = NODE.requeue(
    joins=f", {RUNS} r, {RELAXED_COMMIT}",
    where=" AND r.id = n.run_id",
    returning="'claim', n.id, n.attempt, r.version_id, n.node_id, n.run_id, NULL::jsonb, r.priority",
)


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
STARTED = NODE.start(
    unindexed=True,
    joins=f", {RUNS} r, {RELAXED_COMMIT}",
    where=" AND n.id = ANY(%(ids)s::bigint[])\n"
    f"  AND r.id = n.run_id AND r.status || '' IN ('{R.RUNNING}', '{R.COMPENSATING}')",
    returning=f"n.id, n.attempt, r.version_id, n.node_id, n.run_id, {GIVEN_INPUT} AS input",
)
START_SQL = f"""
WITH claimed AS (
{STARTED}
)
SELECT 'claim', id, attempt, version_id, node_id, run_id, input FROM claimed
UNION ALL
{upstream_outputs("SELECT run_id FROM claimed")}
"""

# Each result also carries its span (the history event) and the status it leaves
# (`from_status`: running, or queued for a direct job's attempt). The span stored adds when
# the attempt was queued (`queued_at`, epoch seconds): the trace draws its queue wait from
# it, never from a guess of when the node became ready.
FINISHED = NODE.finish(
    "n.status || '' = v.from_status",
    reported=", span json, from_status text",
    sets=", worker = %(worker)s",
    where=" AND n.id = ANY(%(ids)s::bigint[])",
    returning="n.id, n.run_id, n.node_id, n.attempt, n.worker, n.started_at, n.finished_at, n.status, v.span, "
    "n.retryable, n.queued_at",
)
# The sole successors (%(follows)s: {after: a result's row id, node_id}) of attempts stored
# succeeded here, still pending in a running run: their first attempt, queued in a job that
# waits nowhere (%(follow_job)s), for the worker to run at once. A worker killed before it
# stores their results leaves them queued with their job nowhere: the reconciler enqueues
# them again, as for a direct job's attempts. The successor's row is found by the unique
# (run, node_id) index.
FOLLOWED = NODE.claim(
    NODE.status_in([N.PENDING], unindexed=True),
    given=f"""(
    SELECT s.id, %(follow_job)s::text FROM json_to_recordset(%(follows)s::json) AS f(after bigint, node_id text)
    JOIN done d ON d.id = f.after AND d.status = '{N.SUCCEEDED}'
    JOIN {NODES} s ON s.run_id = d.run_id AND s.node_id = f.node_id
) AS v(id, job_id)""",
    joins=f", {RUNS} r",
    where=f" AND r.id = n.run_id AND r.status || '' = '{R.RUNNING}'",
    returning=f"n.id, n.run_id, n.node_id, n.attempt, n.tries, r.version_id, {GIVEN_INPUT} AS input",
)


def render_finish(follow: bool) -> str:
    """FINISH_SQL, or with `follow` FINISH_FOLLOW_SQL: the same and FOLLOWED, whose queued
    successors count as queued in the NodeRows returned."""
    followed = f"), followed AS (\n{FOLLOWED}\n" if follow else ""
    rows = "SELECT 'follow', id, run_id, node_id, input::text, attempt, version_id, 0, true FROM followed\nUNION ALL\n"
    joined = f"\n     LEFT JOIN (SELECT id, tries, '{N.QUEUED}' AS status FROM followed) f ON f.id = n.id"
    status, tries = (
        ("coalesce(d.status, f.status, n.status)", "coalesce(f.tries, n.tries)")
        if follow
        else (
            "coalesce(d.status, n.status)",
            "n.tries",
        )
    )
    return f"""
WITH done AS (
{FINISHED}
), history AS (
    INSERT INTO {EVENTS} (run_id, kind, node_id, attempt, at, started_at, worker, data)
    SELECT run_id, 'node.attempt', node_id, attempt, finished_at, started_at, worker,
           span::jsonb || jsonb_build_object('queued_at', extract(epoch FROM queued_at)) FROM done
{followed})
SELECT DISTINCT 'run', run_id, 0::bigint, '', '', 0, 0::bigint, 0, true FROM done
UNION ALL
{rows if follow else ""}SELECT 'node', n.id, n.run_id, n.node_id, {status}, {tries}, r.version_id, r.epoch,
       coalesce(d.retryable, n.retryable)
FROM {RUNS} r JOIN {NODES} n ON n.run_id = r.id LEFT JOIN done d ON d.id = n.id{joined if follow else ""}
WHERE r.id = ANY(%(small_runs)s::bigint[]) AND r.id IN (SELECT run_id FROM done) AND r.status || '' = '{R.RUNNING}'
  AND NOT EXISTS (
      SELECT FROM {NODES} o
      WHERE o.run_id = r.id AND o.status || '' IN ('{N.QUEUED}', '{N.RUNNING}') AND o.id NOT IN (SELECT id FROM done)
  )
"""


# Two texts, each prepared once per connection: a batch with no successor to queue (fan-in,
# slots, failures) keeps the shorter statement.
FINISH_SQL = render_finish(follow=False)
FINISH_FOLLOW_SQL = render_finish(follow=True)


class Followed(NamedTuple):
    """A successor the finish statement queued for the worker to run (FINISH_SQL's `followed`)."""

    noderun_id: int
    run_id: int
    node_id: str
    input: str  # JSON text: the run input, or the replay's edited input
    attempt: int
    version_id: int


class Finished(NamedTuple):
    """What storing results answers: the runs that changed, the NodeRows a notice may carry,
    and the successors queued for the worker to run."""

    run_ids: list[int]
    rows: list[NodeRow]
    followed: list[Followed]


@performs(Cause.START, nodes={N.QUEUED: [N.RUNNING]})
def start_attempts(worker: str, ids: list[int], attempts: list[int], upstream: list[str]) -> list[InputRow]:
    """Move queued attempts (ids, attempts) of running (or compensating) runs to running on `worker`.

    Return a 'claim' row per attempt started (stale, duplicate or cancelled ones are left
    out), with its input, and an 'output' row per succeeded node of their runs among `upstream`.
    """
    params = {"worker": worker, "ids": ids, "attempts": attempts, "upstream": upstream}
    return rows_of(InputRow, execute(START_SQL, params))


@performs(
    Cause.FINISH,
    nodes={N.RUNNING: [N.SUCCEEDED, N.FAILED], N.QUEUED: [N.SUCCEEDED, N.FAILED], N.PENDING: [N.QUEUED]},
)
def finish_attempts(
    results: list[dict[str, Any]],
    worker: str,
    small_runs: Iterable[int],
    follows: Sequence[tuple[int, str]] = (),
) -> Finished:
    """Store attempts' results (FINISH_SQL's rows), each only if still in its `from_status`.

    `follows` names (result's row id, successor node id) pairs: each successor, still
    pending, is queued at its next attempt if that result is stored succeeded and its run
    is running. Return the runs whose nodes finished here, the NodeRows of those of
    `small_runs` that have no other node queued or running (a successor queued here counts
    as queued in them), and the successors queued.
    """
    for result in results:
        check_move(Cause.FINISH, N(result["from_status"]), N(result["status"]))
    params: dict[str, Any] = {
        "results": json.dumps(results),
        "ids": [result["id"] for result in results],
        "worker": worker,
        "small_runs": list(small_runs),
    }
    if follows:
        params["follows"] = json.dumps([{"after": after, "node_id": node_id} for after, node_id in follows])
        params["follow_job"] = new_follow_job_id()
    rows = execute(FINISH_FOLLOW_SQL if follows else FINISH_SQL, params)
    return Finished(
        [row[1] for row in rows if row[0] == "run"],
        [NodeRow(*row[1:]) for row in rows if row[0] == "node"],
        [Followed(*row[1:7]) for row in rows if row[0] == "follow"],
    )


def new_follow_job_id() -> str:
    """The job id of successors a worker runs itself: no such job waits in any queue."""
    return f"syf-{uuid.uuid4().hex}"


# --------------------------------------------------------------------------- the scheduler's decisions


@performs(Cause.SKIP, nodes={N.PENDING: [N.SKIPPED, N.UPSTREAM_FAILED]})
def skip_nodes(skips: Sequence[Skip]) -> None:
    """Mark pending nodes skipped or upstream_failed, with their history events."""
    for _, status in skips:
        check_move(Cause.SKIP, N.PENDING, N(status))
    execute(
        f"""WITH done AS (
               UPDATE {NODES} n SET status = v.status, finished_at = clock_timestamp()
               FROM unnest(%s::bigint[], %s::text[]) AS v(id, status), {RELAXED_COMMIT}
               WHERE n.id = v.id AND n.status = '{N.PENDING}'
               RETURNING n.run_id, n.node_id, n.status
           )
           INSERT INTO {EVENTS} (run_id, kind, node_id, attempt, at, worker, data)
           SELECT run_id, 'node.' || status, node_id, 0, clock_timestamp(), '', '{{}}' FROM done""",
        [[s[0] for s in skips], [s[1] for s in skips]],
    )


RETRIED = NODE.retry(joins=f",\n     {RELAXED_COMMIT}", returning="n.run_id, n.node_id, n.attempt, v.delay")
RETRY_SQL = f"""
WITH done AS (
{RETRIED}
)
INSERT INTO {EVENTS} (run_id, kind, node_id, attempt, at, worker, data)
SELECT run_id, 'node.retry_scheduled', node_id, attempt, clock_timestamp(), '',
       jsonb_build_object('delay_seconds', round(delay::numeric, 3))
FROM done
"""

DEAD_SQL = NODE.kill(returning="n.id")


@performs(Cause.RETRY, nodes={N.FAILED: [N.RETRYING]})
def schedule_retries(retries: Sequence[Retry]) -> None:
    """Make failed nodes wait for their backoff, with their history events."""
    execute(RETRY_SQL, retry_params(retries))


@performs(Cause.DEAD, nodes={N.FAILED: [N.DEAD]})
def mark_dead(kills: Sequence[Kill]) -> list[int]:
    """Mark failed nodes dead; return the ids of those that were still failed at those tries."""
    return [row[0] for row in execute(DEAD_SQL, kill_params(kills))]


@performs(Cause.FINISH, runs={R.RUNNING: [R.SUCCEEDED, R.FAILED]})
def finish_runs(finishes: Sequence[FinishRun]) -> list[tuple[int, str]]:
    """End running runs still at the decision's epoch, with their history events; return
    (run id, status) of those ended."""
    for _, _, status in finishes:
        if not can_move_run(Cause.FINISH, R.RUNNING, R(status)):
            raise ValueError(f"A run cannot finish {status}.")
    rows = execute(
        f"""WITH done AS (
               UPDATE {RUNS} r SET status = v.status, finished_at = clock_timestamp()
               FROM unnest(%s::bigint[], %s::int[], %s::text[]) AS v(id, epoch, status)
               WHERE r.id = v.id AND r.status = '{R.RUNNING}' AND r.epoch = v.epoch
               RETURNING r.id, r.status, r.finished_at
           )
           INSERT INTO {EVENTS} (run_id, kind, node_id, attempt, at, worker, data)
           SELECT id, 'run.' || status, '', 0, finished_at, '', '{{}}' FROM done
           RETURNING run_id, kind""",
        [[f[0] for f in finishes], [f[1] for f in finishes], [f[2] for f in finishes]],
    )
    return [(run_id, kind.removeprefix("run.")) for run_id, kind in rows]


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
def end_compensations(ends: Sequence[tuple[int, str]]) -> list[tuple[int, str]]:
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
    return [(run_id, kind.removeprefix("run.")) for run_id, kind in rows]


# --------------------------------------------------------------------------- the reconciler

# Lost attempts are given back to the retry budget at most FREE_LOST_ATTEMPTS times (Attempts.lose).
LOST_SQL = NODE.lose(returning="n.run_id, n.node_id, n.attempt, n.worker")


@performs(Cause.LOST, nodes={N.RUNNING: [N.FAILED]})
def fail_lost(lost: Sequence[Lost]) -> list[tuple[int, str, int, str]]:
    """Fail running attempts whose worker is gone; return (run id, node id, attempt, worker)."""
    return execute(LOST_SQL, lost_params(lost))


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
