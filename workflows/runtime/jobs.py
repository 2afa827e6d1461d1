"""Pack ready nodes into RQ jobs, claim them in Postgres, enqueue them after commit.

A job carries one or more node attempts of one queue. Nodes whose handler is `batchable`
(short, CPU-only steps) are packed together (see batch_size), so RQ's fixed
cost per job (about 60 Redis commands and 4 ms of worker CPU, measured) is paid once per
batch instead of once per node; every other node gets a job of its own, so a slow LLM or
HTTP call never waits behind another.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections import defaultdict
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

import django_rq
import redis
from django.db import connection, transaction
from rq import Queue

from workflows import handlers
from workflows.core import engine
from workflows.core.graph import Graph, RateLimit
from workflows.runtime import capacity, rqcompat

log = logging.getLogger(__name__)

# Joined into the FROM list of a single autocommit statement, this makes its commit skip the
# wait for the WAL flush (`SET LOCAL` in a statement of its own costs two round trips more).
# Only for changes that can be derived again from what is already durable: claims and
# decisions. If Postgres itself crashes and loses them, the reconciler decides again and
# the attempt runs again (delivery is at-least-once). Runs, results and dead letters are
# always committed synchronously.
RELAXED_COMMIT = "(SELECT set_config('synchronous_commit', 'off', true)) AS relaxed_commit"

TASK = "workflows.runtime.tasks.run_nodes"
MAX_BATCH = 32
SPREAD_FROM = 8
BATCHABLE_PREFIX = "syb-"  # job ids of batchable nodes: a worker may pop several together
FAILED_JOB_TTL = 86400


@dataclass(frozen=True)
class Ready:
    noderun_id: int
    queue: str
    batchable: bool
    upstream: tuple[str, ...] = ()  # a batchable node's predecessors: their outputs go in its job
    cap: int | None = None  # the node's max_in_flight (see capacity.py)
    rate: RateLimit | None = None  # the node's rate_limit (see capacity.py)

    @property
    def limited(self) -> bool:
        return self.cap is not None or self.rate is not None


@dataclass(frozen=True)
class PackedJob:
    job_id: str
    queue: str
    noderun_ids: tuple[int, ...]
    direct: bool = False  # carries what its attempts are given (see claim_and_enqueue)


def ready(noderun_id: int, graph: Graph, node_id: str) -> Ready:
    node = graph.nodes[node_id]
    batchable = handlers.get_handler(node.handler).batchable
    upstream = graph.predecessors(node_id) if batchable else ()
    return Ready(noderun_id, node.queue, batchable, upstream, node.max_in_flight, node.rate_limit)


def new_job_id(batchable: bool) -> str:
    return f"{BATCHABLE_PREFIX if batchable else 'sy-'}{uuid.uuid4().hex}"


def batch_size(count: int, workers: int) -> int:
    """How many of `count` ready batchable nodes go in one job.

    A batchable node runs in microseconds, while each job costs its worker a statement and
    the scheduler a notice: a few ready nodes go in one job, whose result then tells the
    scheduler the run's whole state (advancing.load_snapshots). From SPREAD_FROM nodes a
    job on, they are spread over at least two jobs per live worker.
    """
    return min(MAX_BATCH, max(SPREAD_FROM, math.ceil(count / (2 * max(1, workers)))))


def pack(rows: list[Ready], workers: int, direct: bool) -> list[PackedJob]:
    groups: dict[tuple[str, bool], list[int]] = defaultdict(list)
    for row in rows:
        groups[(row.queue, row.batchable)].append(row.noderun_id)
    packed = []
    for (queue, batchable), ids in groups.items():
        size = batch_size(len(ids), workers) if batchable else 1
        for start in range(0, len(ids), size):
            job_ids = tuple(ids[start : start + size])
            packed.append(PackedJob(new_job_id(batchable), queue, job_ids, direct and batchable))
    return packed


def pack_roots(graph: Graph) -> list[PackedJob]:
    """Pack a new run's root nodes into direct jobs, before the run has node rows.

    Each job names its nodes by their place in `graph.order`; `enqueue_roots` puts the rows'
    ids in once the run is written. Nothing when a root is capped: a scheduler admits those.
    """
    if any(graph.nodes[node_id].limited for node_id in graph.roots):
        return []
    place = {node_id: i for i, node_id in enumerate(graph.order)}
    return pack([ready(place[node_id], graph, node_id) for node_id in graph.roots], 1, direct=True)


def enqueue_roots(
    packed: list[PackedJob], graph: Graph, ids: dict[str, int], run_id: int, version_id: int, run_input: Any
) -> None:
    """Enqueue a new run's root jobs (`pack_roots`), its node rows' ids being `ids` by node.

    The rows were written queued, attempt 1, with the run. If Redis refuses the jobs, the
    reconciler enqueues them again (queued attempts whose job waits nowhere).
    """
    placed, claimed = [], {}
    for job in packed:
        nodes = [graph.order[i] for i in job.noderun_ids]
        placed.append(replace(job, noderun_ids=tuple(ids[n] for n in nodes)))
        given = run_input if job.direct else None
        for node_id in nodes:
            claimed[ids[node_id]] = ("claim", ids[node_id], 1, version_id, node_id, run_id, given)
    try:
        enqueue(placed, claimed, {})
    except redis.RedisError:
        log.warning("run %s: its first jobs were not enqueued; the reconciler will", run_id, exc_info=True)


# Both return rows ('claim', noderun id, attempt, version id, node id, run id, run input or
# NULL) for the attempts they point at their jobs; the claim also returns ('output', ...,
# node id, run id, output) for the succeeded predecessors of the nodes of direct jobs.
CLAIM_SQL = f"""
WITH claimed AS (
    UPDATE workflows_noderun n
    SET status = 'queued', attempt = n.attempt + 1, tries = n.tries + 1, queued_at = now(),
        due_at = NULL, job_id = v.job_id, worker = ''
    FROM unnest(%(ids)s::bigint[], %(job_ids)s::text[]) AS v(id, job_id), workflows_run r, {RELAXED_COMMIT}
    WHERE n.id = v.id AND n.status = %(status)s AND r.id = n.run_id
    RETURNING n.id, n.attempt, r.version_id, n.node_id, n.run_id,
              CASE WHEN n.id = ANY(%(direct)s::bigint[]) THEN coalesce(n.input_override, r.input) END AS input
)
SELECT 'claim', id, attempt, version_id, node_id, run_id, input FROM claimed
UNION ALL
SELECT 'output', u.id, u.attempt, 0::bigint, u.node_id, u.run_id, u.output FROM workflows_noderun u
WHERE u.run_id IN (SELECT run_id FROM claimed WHERE input IS NOT NULL)
  AND u.node_id = ANY(%(upstream)s::text[]) AND u.status = 'succeeded'
"""

REQUEUE_SQL = f"""
UPDATE workflows_noderun n SET queued_at = now(), job_id = v.job_id
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(job_ids)s::text[]) AS v(id, attempt, job_id),
     workflows_run r,
     {RELAXED_COMMIT}
WHERE n.id = v.id AND n.status = 'queued' AND n.attempt = v.attempt AND r.id = n.run_id
RETURNING 'claim', n.id, n.attempt, r.version_id, n.node_id, n.run_id, NULL::jsonb
"""

Item = tuple[int, int, int, str]  # a job's node attempt: (noderun id, attempt, version id, node id)
Given = dict[int, tuple[int, Any, dict[str, Any]]]  # noderun id -> (run id, run input, upstream outputs)


def claim_and_enqueue(rows: list[Ready], workers: int, status: str = engine.PENDING) -> int:
    """Move nodes still in `status` (pending, or retrying) to queued (new attempt) and enqueue them.

    Batchable nodes go in direct jobs: the claim also reads their run's input and their
    predecessors' outputs, and the job carries them, so the worker runs them without a
    claim of its own (execution.run_batch). One autocommit statement with a relaxed commit:
    never call it inside a transaction whose other changes must be durable at commit.
    Nodes with a concurrency cap or a rate limit are claimed in a transaction of their own,
    as far as their limits allow (capacity.admit).
    """
    claimed = claim_ready([row for row in rows if not row.limited], workers, status)
    limited = [row for row in rows if row.limited]
    if limited:
        with transaction.atomic():
            claimed += claim_ready(capacity.admit(limited), workers, status)
    return claimed


def claim_ready(rows: list[Ready], workers: int, status: str) -> int:
    upstream = sorted({p for row in rows for p in row.upstream})
    return claim_packed(CLAIM_SQL, pack(rows, workers, direct=True), {"status": status, "upstream": upstream})


def requeue(rows: list[tuple[Ready, int]], workers: int) -> int:
    """Enqueue again queued attempts whose job was lost: (the node, its attempt).

    The new jobs are not direct: the worker claims their attempts, as it would after a crash.
    """
    packed = pack([ready for ready, _ in rows], workers, direct=False)
    attempts = {ready.noderun_id: attempt for ready, attempt in rows}
    return claim_packed(
        REQUEUE_SQL, packed, {"attempts": [attempts[i] for job in packed for i in job.noderun_ids]}
    )


def claim_packed(sql: str, packed: list[PackedJob], params: dict[str, Any]) -> int:
    """Point the packed nodes at their jobs with `sql`; enqueue what it claimed after commit."""
    if not packed:
        return 0
    params = {
        **params,
        "ids": [i for job in packed for i in job.noderun_ids],
        "job_ids": [job.job_id for job in packed for _ in job.noderun_ids],
        "direct": [i for job in packed if job.direct for i in job.noderun_ids],
    }
    with connection.cursor() as cur:
        cur.execute(sql, params)
        rows = cur.fetchall()
    claimed = {row[1]: row for row in rows if row[0] == "claim"}
    outputs: dict[int, dict[str, Any]] = defaultdict(dict)
    for _, _, _, _, node_id, run_id, output in (row for row in rows if row[0] == "output"):
        outputs[run_id][node_id] = output
    transaction.on_commit(lambda: enqueue(packed, claimed, outputs))
    return len(claimed)


@cache
def rq_queue(name: str) -> Queue:
    return django_rq.get_queue(name)


def enqueue(
    packed: list[PackedJob], claimed: dict[int, tuple[Any, ...]], outputs: dict[int, dict[str, Any]]
) -> None:
    """Push the jobs of the claimed attempts to RQ in one pipeline."""
    pipe = rq_queue(packed[0].queue).connection.pipeline()
    for job in packed:
        rows = [claimed[i] for i in job.noderun_ids if i in claimed]
        if rows:
            items = [
                (noderun_id, attempt, version_id, node_id)
                for _, noderun_id, attempt, version_id, node_id, *_ in rows
            ]
            given: Given = {
                noderun_id: (run_id, run_input, outputs.get(run_id, {}))
                for _, noderun_id, _, _, _, run_id, run_input in rows
                if run_input is not None
            }
            rqcompat.push_job(pipe, rq_queue(job.queue), TASK, job.job_id, (items, given), FAILED_JOB_TTL)
    pipe.execute()


def jobs_waiting(jobs: list[tuple[str, str]]) -> list[bool]:
    """Return, for each (RQ job id, queue name), whether the job still waits in its queue.

    The queue itself is asked, not the job's hash: a job taken by a worker that died before
    claiming its attempts waits nowhere, though its hash outlives the worker.
    """
    return rqcompat.are_waiting(
        rq_queue("default").connection, [(job_id, rq_queue(queue)) for job_id, queue in jobs]
    )
