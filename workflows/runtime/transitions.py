"""The one module family that changes the status of a node or a run, split by lifecycle:
this module for a task's attempts, transitions_runs.py for runs (start, end, compensation,
and the operators' cancel, replay and re-run), transitions_maps.py for map nodes and their
items, transitions_waits.py for waiting nodes and transitions_forks.py for forked runs. This
module re-exports the others, so callers write transitions.<name> for the whole family.

Every statement that writes a status is in this family, and nowhere else
(tests/unit/test_transitions.py scans the tree for any other). Here: the scheduler's claims,
the worker's start and finish of an attempt, skips, retries, dead nodes and lost attempts.
Each is a
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
from typing import Any, NamedTuple

from workflows.core.states import NODE_TERMINAL, Cause, NodeStatus as N, RunStatus as R
from workflows.runtime.lifecycle import (  # re-exported (`x as x`): transitions.<name> for the whole family
    RELAXED_COMMIT as RELAXED_COMMIT,
    RELAXED_COMMIT_IF as RELAXED_COMMIT_IF,
    Attempts as Attempts,
    InputRow as InputRow,
    Kill as Kill,
    Lost as Lost,
    Retry as Retry,
    check_move as check_move,
    execute as execute,
    flush_commits as flush_commits,
    kill_params as kill_params,
    lost_params as lost_params,
    performs as performs,
    retry_params as retry_params,
    rows_of as rows_of,
)
from workflows.runtime.transitions_forks import (  # re-exported (`x as x`): transitions.<name> for the whole family
    ForkNode as ForkNode,
    create_fork as create_fork,
)
from workflows.runtime.transitions_maps import (  # re-exported (`x as x`): transitions.<name> for the whole family
    ItemRow as ItemRow,
    MapNode as MapNode,
    claim_items as claim_items,
    fail_lost_items as fail_lost_items,
    failed_items as failed_items,
    finish_items as finish_items,
    free_slots as free_slots,
    gather_map as gather_map,
    has_open_items as has_open_items,
    insert_items as insert_items,
    kill_items as kill_items,
    lock_map as lock_map,
    pick_items as pick_items,
    replay_item as replay_item,
    requeue_items as requeue_items,
    retry_items as retry_items,
    start_items as start_items,
)
from workflows.runtime.transitions_runs import (  # re-exported (`x as x`): transitions.<name> for the whole family
    NOBODYS_CHILD,
    CreatedItem as CreatedItem,
    CreatedRun as CreatedRun,
    Ended as Ended,
    FinishRun as FinishRun,
    WorkflowChanged as WorkflowChanged,
    begin_compensation as begin_compensation,
    cancel_run as cancel_run,
    create_run as create_run,
    create_runs as create_runs,
    create_steps as create_steps,
    end_compensations as end_compensations,
    finish_runs as finish_runs,
    replay_node as replay_node,
    rerun_nodes as rerun_nodes,
    resume_runs as resume_runs,
)
from workflows.runtime.transitions_waits import (  # re-exported (`x as x`): transitions.<name> for the whole family
    Awake as Awake,
    EnteredWait as EnteredWait,
    Left as Left,
    decide_waits as decide_waits,
    enter_waits as enter_waits,
    expire_waits as expire_waits,
    hold_attempt as hold_attempt,
    park_agent as park_agent,
    release_held as release_held,
    resume_agents as resume_agents,
    settle_children as settle_children,
    wake_waits as wake_waits,
)
from workflows.store.models import NodeRun
from workflows.store.statements import EVENTS, NODES, RUNS

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


def finished(runs_first: bool) -> str:
    """The results' update (the `done` CTE); with `runs_first` it reads `ending` first, so the
    runs the statement may end are locked before any of their nodes (see ENDED).

    Each result also carries its span (the history event) and the status it leaves
    (`from_status`: running, or queued for a direct job's attempt). The span stored adds when
    the attempt was queued (`queued_at`, epoch seconds): the trace draws its queue wait from
    it, never from a guess of when the node became ready.
    """
    first = " AND (SELECT count(*) FROM ending) >= 0" if runs_first else ""
    return NODE.finish(
        "n.status || '' = v.from_status",
        reported=", span json, from_status text",
        sets=", worker = %(worker)s",
        where=f" AND n.id = ANY(%(ids)s::bigint[]){first}",
        returning="n.id, n.run_id, n.node_id, n.attempt, n.worker, n.started_at, n.finished_at, n.status, "
        "v.span, n.retryable, n.queued_at",
    )


# The successors (%(follows)s: {after: a result's row id, node_id, others}) of attempts
# stored succeeded here, still pending in a running run, whose other predecessors (`others`,
# a fan-in's: engine.successors_to_follow) have succeeded too, before this statement or in
# it: their first attempt, queued in a job that waits nowhere (%(follow_job)s), for the
# worker to run at once. Two predecessors stored by two statements at the same moment each
# see the other unfinished (a statement reads the rows committed when it began), so at most
# one queues the successor, and when neither does the scheduler decides as for any fan-in.
# A worker killed before it stores their results leaves them queued with their job nowhere:
# the reconciler enqueues them again, as for a direct job's attempts. Rows are found by the
# unique (run, node_id) index.
FOLLOWED = NODE.claim(
    NODE.status_in([N.PENDING], unindexed=True),
    given=f"""(
    SELECT s.id, %(follow_job)s::text
    FROM json_to_recordset(%(follows)s::json) AS f(after bigint, node_id text, others json)
    JOIN done d ON d.id = f.after AND d.status = '{N.SUCCEEDED}'
    JOIN {NODES} s ON s.run_id = d.run_id AND s.node_id = f.node_id
    WHERE NOT EXISTS (
        SELECT FROM {NODES} p
        WHERE p.run_id = d.run_id AND p.node_id IN (SELECT json_array_elements_text(f.others))
          AND p.status || '' <> '{N.SUCCEEDED}' AND p.id NOT IN (SELECT id FROM done WHERE status = '{N.SUCCEEDED}')
    )
) AS v(id, job_id)""",
    joins=f", {RUNS} r",
    where=f" AND r.id = n.run_id AND r.status || '' = '{R.RUNNING}'",
    returning=f"n.id, n.run_id, n.node_id, n.attempt, n.tries, r.version_id, {GIVEN_INPUT} AS input",
)


# The runs this store may end (%(ends)s: runs of small graphs whose node with no successor
# is among the results, execution.settle), locked first, as every transaction that changes
# a run and its nodes does (lifecycle.LOCK_RUNS; `finished`). Such a run ends succeeded here
# when every node of it is now terminal and none is dead (engine.finish_status, whose one
# decision is then that the run succeeded), it is still running at the epoch this
# statement read, and no parent waits on it (a child run's end moves its parent:
# advancing.apply_finishes). The node rows are read as the statement found them, so the
# rows stored here count as stored: a run whose last two nodes finish in two statements at
# once is ended by neither, and decided by a scheduler as before.
TERMINAL_OK = ", ".join(f"'{s}'" for s in sorted(NODE_TERMINAL - {N.DEAD}))
ENDING = f"""ending AS (
    SELECT r.id FROM {RUNS} r WHERE r.id = ANY(%(ends)s::bigint[]) ORDER BY r.id FOR NO KEY UPDATE OF r
)"""
ENDED = f"""ended AS (
    UPDATE {RUNS} r SET status = '{R.SUCCEEDED}', finished_at = clock_timestamp()
    FROM {RUNS} seen
    WHERE r.id IN (SELECT run_id FROM done WHERE status = '{N.SUCCEEDED}') AND r.id IN (SELECT id FROM ending)
      AND seen.id = r.id AND r.epoch = seen.epoch AND r.status || '' = '{R.RUNNING}'
      AND NOT EXISTS (
          SELECT FROM {NODES} o
          WHERE o.run_id = r.id AND o.status || '' NOT IN ({TERMINAL_OK})
            AND o.id NOT IN (SELECT id FROM done WHERE status = '{N.SUCCEEDED}')
      )
      AND {NOBODYS_CHILD}
    RETURNING r.id, r.finished_at
), run_history AS (
    INSERT INTO {EVENTS} (run_id, kind, node_id, attempt, at, worker, data)
    SELECT id, 'run.{R.SUCCEEDED}', '', 0, finished_at, '', '{{}}' FROM ended
)"""


def render_finish(follow: bool, end: bool = False) -> str:
    """FINISH_SQL; with `follow` the same and FOLLOWED, whose queued successors count as
    queued in the NodeRows returned, and whose other predecessors' outputs (stored before
    this statement) come back as 'output' rows; with `end` the same and ENDED, whose runs
    come back as 'ended' rows."""
    start = f"{ENDING}, " if end else ""
    ended = f", {ENDED}" if end else ""
    ended_rows = (
        "SELECT 'ended', id, 0::bigint, '', '', 0, 0::bigint, 0, true FROM ended\nUNION ALL\n" if end else ""
    )
    followed = f", followed AS (\n{FOLLOWED}\n)" if follow else ""
    rows = f"""SELECT 'follow', id, run_id, node_id, input::text, attempt, version_id, 0, true FROM followed
UNION ALL
SELECT 'output', p.id, p.run_id, p.node_id, p.output::text, 0, 0::bigint, 0, true
FROM json_to_recordset(%(follows)s::json) AS f(after bigint, node_id text, others json)
JOIN done d ON d.id = f.after
JOIN followed fo ON fo.run_id = d.run_id AND fo.node_id = f.node_id
JOIN {NODES} p ON p.run_id = d.run_id AND p.node_id IN (SELECT json_array_elements_text(f.others))
WHERE p.status || '' = '{N.SUCCEEDED}'
UNION ALL
"""
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
WITH {start}done AS (
{finished(end)}
), history AS (
    INSERT INTO {EVENTS} (run_id, kind, node_id, attempt, at, started_at, worker, data)
    SELECT run_id, 'node.attempt', node_id, attempt, finished_at, started_at, worker,
           span::jsonb || jsonb_build_object('queued_at', extract(epoch FROM queued_at))
    FROM done, {RELAXED_COMMIT_IF}
){ended}{followed}
SELECT DISTINCT 'run', run_id, 0::bigint, '', '', 0, 0::bigint, 0, true FROM done
UNION ALL
{ended_rows}{rows if follow else ""}SELECT 'node', n.id, n.run_id, n.node_id, {status}, {tries}, r.version_id, r.epoch,
       coalesce(d.retryable, n.retryable)
FROM {RUNS} r JOIN {NODES} n ON n.run_id = r.id LEFT JOIN done d ON d.id = n.id{joined if follow else ""}
WHERE r.id = ANY(%(small_runs)s::bigint[]) AND r.id IN (SELECT run_id FROM done) AND r.status || '' = '{R.RUNNING}'
  AND NOT EXISTS (
      SELECT FROM {NODES} o
      WHERE o.run_id = r.id AND o.status || '' IN ('{N.QUEUED}', '{N.RUNNING}') AND o.id NOT IN (SELECT id FROM done)
  )
"""


# Four texts, each prepared once per connection: a batch with no successor to queue (fan-in,
# slots, failures) keeps the shorter statement, and one with no run to end (every hop but
# a run's last) neither locks runs nor reads them for an end (with them, every store of an
# idle run took about 0.2 ms longer, measured in one sitting).
FINISH_SQL = render_finish(follow=False)
FINISH_FOLLOW_SQL = render_finish(follow=True)
FINISH_END_SQL = render_finish(follow=False, end=True)
FINISH_FOLLOW_END_SQL = render_finish(follow=True, end=True)
FINISHES = {
    (False, False): FINISH_SQL,
    (True, False): FINISH_FOLLOW_SQL,
    (False, True): FINISH_END_SQL,
    (True, True): FINISH_FOLLOW_END_SQL,
}


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
    the successors queued for the worker to run, (run id, node id) -> output (JSON text)
    of their predecessors stored before (those stored by the statement are the caller's),
    and the runs the statement ended (succeeded: ENDED)."""

    run_ids: list[int]
    rows: list[NodeRow]
    followed: list[Followed]
    outputs: dict[tuple[int, str], str]
    ended: list[int]


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
    runs={R.RUNNING: [R.SUCCEEDED]},
)
def finish_attempts(
    results: list[dict[str, Any]],
    worker: str,
    small_runs: Iterable[int],
    follows: Sequence[tuple[int, str, Sequence[str]]] = (),
    relaxed: bool = False,
    ends: Sequence[int] = (),
) -> Finished:
    """Store attempts' results (FINISH_SQL's rows), each only if still in its `from_status`.

    `follows` names (result's row id, successor node id, its other predecessors): each
    successor, still pending, is queued at its next attempt if that result is stored
    succeeded, its run is running and the others have succeeded (see FOLLOWED). `ends`
    names runs this store may end: each ends succeeded if these results complete it (see
    ENDED). Return the runs whose nodes finished here, the NodeRows of those of
    `small_runs` that have no other node queued or running (a successor queued here counts
    as queued in them), the successors queued, and the runs ended. With `relaxed`, the
    commit does not wait for the WAL flush: the caller makes it durable with its next
    synchronous commit or lifecycle.flush_commits before anything acts on what was stored
    (execution.settle); never with `ends`, whose ends are announced once committed.
    """
    for result in results:
        check_move(Cause.FINISH, N(result["from_status"]), N(result["status"]))
    params: dict[str, Any] = {
        "results": json.dumps(results),
        "ids": [result["id"] for result in results],
        "worker": worker,
        "small_runs": list(small_runs),
        "relaxed": relaxed,
    }
    if ends:
        params["ends"] = list(ends)
    if follows:
        params["follows"] = json.dumps(
            [{"after": after, "node_id": node_id, "others": others} for after, node_id, others in follows]
        )
        params["follow_job"] = new_follow_job_id()
    rows = execute(FINISHES[bool(follows), bool(ends)], params)
    return Finished(
        [row[1] for row in rows if row[0] == "run"],
        [NodeRow(*row[1:]) for row in rows if row[0] == "node"],
        [Followed(*row[1:7]) for row in rows if row[0] == "follow"],
        {(row[2], row[3]): row[4] for row in rows if row[0] == "output"},
        [row[1] for row in rows if row[0] == "ended"],
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


# --------------------------------------------------------------------------- the reconciler

# Lost attempts are given back to the retry budget at most FREE_LOST_ATTEMPTS times (Attempts.lose).
LOST_SQL = NODE.lose(returning="n.run_id, n.node_id, n.attempt, n.worker")


@performs(Cause.LOST, nodes={N.RUNNING: [N.FAILED]})
def fail_lost(lost: Sequence[Lost]) -> list[tuple[int, str, int, str]]:
    """Fail running attempts whose worker is gone; return (run id, node id, attempt, worker)."""
    return execute(LOST_SQL, lost_params(lost))
