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
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, NamedTuple

import django_rq
import redis
from django.db import transaction
from rq import Queue

from workflows import handlers
from workflows.core import priorities
from workflows.core.compensation import given_by, step_node
from workflows.core.flowcontrol import Concurrency
from workflows.core.graph import TASK as TASK_KIND, Graph, Node, RateLimit
from workflows.core.states import NodeStatus
from workflows.runtime import capacity, rqcompat, transitions
from workflows.runtime.transitions import InputRow

log = logging.getLogger(__name__)

TASK = "workflows.runtime.tasks.run_nodes"
MAX_BATCH = 32
SPREAD_FROM = 8
BATCHABLE_PREFIX = "syb-"  # job ids of batchable nodes: a worker may pop several together
SLOTS_PREFIX = "sys-"  # job ids of I/O-bound nodes: a worker with free slots takes several together
FAILED_JOB_TTL = 86400


@dataclass(frozen=True)
class Ready:
    noderun_id: int
    queue: str
    batchable: bool
    upstream: tuple[str, ...] = ()  # a batchable node's predecessors: their outputs go in its job
    cap: int | None = None  # the node's max_in_flight (see capacity.py)
    rate: RateLimit | None = None  # the node's rate_limit (see capacity.py)
    node_id: str = ""
    kind: str = TASK_KIND  # runtime/kinds.py claims it
    flow: Concurrency | None = None  # the node's concurrency key (see capacity.py, flowkeys.py)
    io_bound: bool = False  # its attempts run in a worker's slots (kinds.is_io_bound)

    @property
    def limited(self) -> bool:
        return self.cap is not None or self.rate is not None or self.flow is not None


@dataclass(frozen=True)
class PackedJob:
    job_id: str
    queue: str
    noderun_ids: tuple[int, ...]
    direct: bool = False  # carries what its attempts are given (see claim_and_enqueue)


@dataclass(frozen=True)
class RootJob:
    """A job packed for a new run's roots before the run has node rows (`pack_roots`)."""

    job_id: str
    queue: str
    node_ids: tuple[str, ...]
    direct: bool

    def placed(self, ids: dict[str, int]) -> PackedJob:
        """This job, its nodes named by their rows' ids (node id -> row id)."""
        return PackedJob(self.job_id, self.queue, tuple(ids[n] for n in self.node_ids), self.direct)


class GivenInput(NamedTuple):
    """What a direct job's attempt is given: its run, its run input, its predecessors' outputs."""

    run_id: int
    input: Any
    upstream: dict[str, Any]


Item = tuple[int, int, int, str]  # a job's node attempt: (noderun id, attempt, version id, node id)
Given = dict[int, GivenInput]  # noderun id -> what its attempt is given


def ready(noderun_id: int, graph: Graph, node_id: str) -> Ready:
    node = step_node(graph, node_id)  # a node, or a compensation step
    batchable = handlers.get_handler(node.handler).batchable
    upstream = given_by(graph, node_id) if batchable else ()
    return Ready(
        noderun_id,
        node.queue,
        batchable,
        upstream,
        node.max_in_flight,
        node.rate_limit,
        node_id,
        node.kind,
        node.concurrency,
        _is_io_bound(node),
    )


def _never_io_bound(node: Node) -> bool:
    return False


_is_io_bound: Callable[[Node], bool] = _never_io_bound


def use_io_bound(is_io_bound: Callable[[Node], bool]) -> None:
    """Tell which nodes' jobs get SLOTS_PREFIX (runtime/kinds.py installs `kinds.is_io_bound`:
    it imports this module, so this module cannot import it)."""
    global _is_io_bound
    _is_io_bound = is_io_bound


def new_job_id(batchable: bool, io_bound: bool = False) -> str:
    prefix = BATCHABLE_PREFIX if batchable else SLOTS_PREFIX if io_bound else "sy-"
    return f"{prefix}{uuid.uuid4().hex}"


def job_id_for(batchable: bool, members: list[Ready]) -> str:
    """A job's id: a job of one I/O-bound node's attempt is marked so (SLOTS_PREFIX)."""
    return new_job_id(batchable, not batchable and len(members) == 1 and members[0].io_bound)


def batch_size(count: int, workers: int) -> int:
    """How many of `count` ready batchable nodes go in one job.

    A batchable node runs in microseconds, while each job costs its worker a statement and
    the scheduler a notice: a few ready nodes go in one job, whose result then tells the
    scheduler the run's whole state (advancing.load_snapshots). From SPREAD_FROM nodes a
    job on, they are spread over at least two jobs per live worker.
    """
    return min(MAX_BATCH, max(SPREAD_FROM, math.ceil(count / (2 * max(1, workers)))))


def group(rows: list[Ready], workers: int) -> list[tuple[str, bool, list[Ready]]]:
    """Split ready nodes into jobs: (queue, batchable, the job's nodes) each."""
    groups: dict[tuple[str, bool], list[Ready]] = defaultdict(list)
    for row in rows:
        groups[(row.queue, row.batchable)].append(row)
    jobs = []
    for (queue, batchable), members in groups.items():
        size = batch_size(len(members), workers) if batchable else 1
        for start in range(0, len(members), size):
            jobs.append((queue, batchable, members[start : start + size]))
    return jobs


def pack(rows: list[Ready], workers: int, direct: bool) -> list[PackedJob]:
    return [
        PackedJob(
            job_id_for(batchable, members), queue, tuple(r.noderun_id for r in members), direct and batchable
        )
        for queue, batchable, members in group(rows, workers)
    ]


def pack_roots(graph: Graph) -> list[RootJob]:
    """Pack a new run's root nodes into direct jobs, before the run has node rows.

    `enqueue_roots` names the rows once the run is written. Nothing when a root is capped:
    a scheduler admits those; nor when a root is not a task (a wait node): a scheduler
    claims it by its kind (runtime/kinds.py).
    """
    if any(graph.nodes[n].limited or graph.nodes[n].kind != TASK_KIND for n in graph.roots):
        return []
    rows = [ready(0, graph, node_id) for node_id in graph.roots]  # 0: no row yet
    return [
        RootJob(job_id_for(batchable, members), queue, tuple(r.node_id for r in members), batchable)
        for queue, batchable, members in group(rows, 1)
    ]


def enqueue_roots(
    roots: list[RootJob], ids: dict[str, int], run_id: int, version_id: int, run_input: Any, priority: int = 0
) -> None:
    """Enqueue a new run's root jobs (`pack_roots`), its node rows' ids being `ids` by node.

    The rows were written queued, attempt 1, with the run. If Redis refuses the jobs, the
    reconciler enqueues them again (queued attempts whose job waits nowhere).
    """
    placed, claimed = [], {}
    for job in roots:
        placed.append(job.placed(ids))
        given = run_input if job.direct else None
        for node_id in job.node_ids:
            claimed[ids[node_id]] = InputRow(
                "claim", ids[node_id], 1, version_id, node_id, run_id, given, priority
            )
    try:
        enqueue(placed, claimed, {})
    except redis.RedisError:
        log.warning("run %s: its first jobs were not enqueued; the reconciler will", run_id, exc_info=True)


def claim_and_enqueue(rows: list[Ready], workers: int, status: NodeStatus = NodeStatus.PENDING) -> int:
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


def claim_ready(rows: list[Ready], workers: int, status: NodeStatus) -> int:
    upstream = sorted({p for row in rows for p in row.upstream})
    return claim_packed(
        lambda params: transitions.claim_nodes(status, params),
        pack(rows, workers, direct=True),
        {"upstream": upstream},
    )


def requeue(rows: list[tuple[Ready, int]], workers: int) -> int:
    """Enqueue again queued attempts whose job was lost: (the node, its attempt).

    The new jobs are not direct: the worker claims their attempts, as it would after a crash.
    """
    packed = pack([ready for ready, _ in rows], workers, direct=False)
    attempts = {ready.noderun_id: attempt for ready, attempt in rows}
    return claim_packed(
        transitions.requeue_attempts,
        packed,
        {"attempts": [attempts[i] for job in packed for i in job.noderun_ids]},
    )


def claim_packed(
    claim: Callable[[dict[str, Any]], list[InputRow]], packed: list[PackedJob], params: dict[str, Any]
) -> int:
    """Point the packed nodes at their jobs with `claim`; enqueue what it claimed after commit."""
    if not packed:
        return 0
    params = {
        **params,
        "ids": [i for job in packed for i in job.noderun_ids],
        "job_ids": [job.job_id for job in packed for _ in job.noderun_ids],
        "direct": [i for job in packed if job.direct for i in job.noderun_ids],
    }
    rows = claim(params)
    claimed = {row.noderun_id: row for row in rows if row.kind == "claim"}
    outputs: dict[int, dict[str, Any]] = defaultdict(dict)
    for row in rows:
        if row.kind == "output":
            outputs[row.run_id][row.node_id] = row.value
    transaction.on_commit(lambda: enqueue(packed, claimed, outputs))
    return len(claimed)


@cache
def rq_queue(name: str) -> Queue:
    return django_rq.get_queue(name)


def enqueue(
    packed: list[PackedJob], claimed: dict[int, InputRow], outputs: dict[int, dict[str, Any]]
) -> None:
    """Push the jobs of the claimed attempts to RQ in one pipeline, each to its queue's
    urgent lane when one of its attempts' runs is urgent (core/priorities.py)."""
    pipe = rq_queue(packed[0].queue).connection.pipeline()
    for job in packed:
        rows = [claimed[i] for i in job.noderun_ids if i in claimed]
        if rows:
            lane = priorities.lane(job.queue, max(r.priority for r in rows))
            items = [(r.noderun_id, r.attempt, r.version_id, r.node_id) for r in rows]
            given: Given = {
                r.noderun_id: GivenInput(r.run_id, r.value, outputs.get(r.run_id, {}))
                for r in rows
                if r.value is not None
            }
            rqcompat.push_job(pipe, rq_queue(lane), TASK, job.job_id, (items, given), FAILED_JOB_TTL)
    pipe.execute()


def jobs_waiting(jobs: list[tuple[str, str]]) -> list[bool]:
    """Return, for each (RQ job id, queue name), whether the job still waits in its queue.

    The queue itself is asked, not the job's hash: a job taken by a worker that died before
    claiming its attempts waits nowhere, though its hash outlives the worker. Both of the
    queue's lanes are asked (the job's lane is not recorded).
    """
    plain = rqcompat.are_waiting(
        rq_queue("default").connection, [(job_id, rq_queue(queue)) for job_id, queue in jobs]
    )
    urgent = rqcompat.are_waiting(
        rq_queue("default").connection,
        [(job_id, rq_queue(priorities.lane(queue, priorities.HIGHEST))) for job_id, queue in jobs],
    )
    return [a or b for a, b in zip(plain, urgent, strict=True)]
