"""Pack ready nodes into RQ jobs, claim them in Postgres, enqueue them after commit.

A job carries one or more node attempts of one queue. Nodes whose handler is `batchable`
(short, CPU-only steps) are packed together (see batch_size), so RQ's fixed
cost per job (about 60 Redis commands and 4 ms of worker CPU, measured) is paid once per
batch instead of once per node; every other node gets a job of its own, so a slow LLM or
HTTP call never waits behind another.
"""

from __future__ import annotations

import math
import uuid
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from typing import Any

import django_rq
from django.db import connection, transaction
from rq import Queue

from workflows import engine, handlers
from workflows.graph import Node

# Joined into the FROM list of a single autocommit statement, this makes its commit skip the
# wait for the WAL flush (`SET LOCAL` in a statement of its own costs two round trips more).
# Only for changes that can be derived again from what is already durable: claims and
# decisions. If Postgres itself crashes and loses them, the reconciler decides again and
# the attempt runs again (delivery is at-least-once). Runs, results and dead letters are
# always committed synchronously.
RELAXED_COMMIT = "(SELECT set_config('synchronous_commit', 'off', true)) AS relaxed_commit"

TASK = "workflows.tasks.run_nodes"
MAX_BATCH = 32
SPREAD_FROM = 8
BATCHABLE_PREFIX = "syb-"  # job ids of batchable nodes: a worker may pop several together
FAILED_JOB_TTL = 86400


@dataclass(frozen=True)
class Ready:
    noderun_id: int
    queue: str
    batchable: bool


@dataclass(frozen=True)
class PackedJob:
    job_id: str
    queue: str
    noderun_ids: tuple[int, ...]


def ready(noderun_id: int, node: Node) -> Ready:
    return Ready(noderun_id, node.queue, handlers.get_handler(node.handler).batchable)


def new_job_id(batchable: bool) -> str:
    return f"{BATCHABLE_PREFIX if batchable else 'sy-'}{uuid.uuid4().hex}"


def batch_size(count: int, workers: int) -> int:
    """How many of `count` ready batchable nodes go in one job.

    A batchable node runs in microseconds, while each job costs its worker two statements
    (claim, results) and the scheduler a notice per job: a few ready nodes go in one job,
    whose result then tells the scheduler the run's whole state (advancing.load_snapshots).
    From SPREAD_FROM nodes a job on, they are spread over at least two jobs per live worker.
    """
    return min(MAX_BATCH, max(SPREAD_FROM, math.ceil(count / (2 * max(1, workers)))))


def pack(rows: list[Ready], workers: int) -> list[PackedJob]:
    groups: dict[tuple[str, bool], list[int]] = defaultdict(list)
    for row in rows:
        groups[(row.queue, row.batchable)].append(row.noderun_id)
    packed = []
    for (queue, batchable), ids in groups.items():
        size = batch_size(len(ids), workers) if batchable else 1
        for start in range(0, len(ids), size):
            packed.append(PackedJob(new_job_id(batchable), queue, tuple(ids[start : start + size])))
    return packed


# Both return what a job item carries: (noderun id, attempt, version id, node id).
CLAIM_SQL = f"""
UPDATE workflows_noderun n
SET status = 'queued', attempt = n.attempt + 1, tries = n.tries + 1, queued_at = now(),
    due_at = NULL, job_id = v.job_id, worker = ''
FROM unnest(%(ids)s::bigint[], %(job_ids)s::text[]) AS v(id, job_id), workflows_run r, {RELAXED_COMMIT}
WHERE n.id = v.id AND n.status = %(status)s AND r.id = n.run_id
RETURNING n.id, n.attempt, r.version_id, n.node_id
"""

REQUEUE_SQL = f"""
UPDATE workflows_noderun n SET queued_at = now(), job_id = v.job_id
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(job_ids)s::text[]) AS v(id, attempt, job_id),
     workflows_run r,
     {RELAXED_COMMIT}
WHERE n.id = v.id AND n.status = 'queued' AND n.attempt = v.attempt AND r.id = n.run_id
RETURNING n.id, n.attempt, r.version_id, n.node_id
"""

Item = tuple[int, int, int, str]  # a job's node attempt: (noderun id, attempt, version id, node id)


def claim_and_enqueue(rows: list[Ready], workers: int, status: str = engine.PENDING) -> int:
    """Move nodes still in `status` (pending, or retrying) to queued (new attempt) and enqueue them.

    One autocommit statement with a relaxed commit: never call it inside a transaction
    whose other changes must be durable at commit.
    """
    return claim_packed(CLAIM_SQL, pack(rows, workers), {"status": status})


def requeue(rows: list[tuple[Ready, int]], workers: int) -> int:
    """Enqueue again queued attempts whose job was lost: (the node, its attempt)."""
    packed = pack([ready for ready, _ in rows], workers)
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
    }
    with connection.cursor() as cur:
        cur.execute(sql, params)
        claimed = {row[0]: row for row in cur.fetchall()}
    transaction.on_commit(lambda: enqueue(packed, claimed))
    return len(claimed)


@cache
def rq_queue(name: str) -> Queue:
    return django_rq.get_queue(name)


def enqueue(packed: list[PackedJob], claimed: dict[int, Item]) -> None:
    """Push the jobs of the claimed attempts to RQ in one pipeline."""
    pipe = rq_queue(packed[0].queue).connection.pipeline()
    for job in packed:
        items = [claimed[i] for i in job.noderun_ids if i in claimed]
        if items:
            data = Queue.prepare_data(
                TASK, (items,), timeout=-1, result_ttl=0, failure_ttl=FAILED_JOB_TTL, job_id=job.job_id
            )
            rq_queue(job.queue).enqueue_many([data], pipeline=pipe)
    pipe.execute()


def jobs_waiting(jobs: list[tuple[str, str]]) -> list[bool]:
    """Return, for each (RQ job id, queue name), whether the job still waits in its queue.

    The queue itself is asked, not the job's hash: a job taken by a worker that died before
    claiming its attempts waits nowhere, though its hash outlives the worker.
    """
    pipe = rq_queue("default").connection.pipeline(transaction=False)
    for job_id, queue in jobs:
        pipe.lpos(rq_queue(queue).key, job_id)
    return [position is not None for position in pipe.execute()]
