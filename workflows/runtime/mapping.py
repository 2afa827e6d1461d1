"""Map nodes in the runtime: enter a map, claim its items, run them in workers, gather them.

A ready map node is claimed by its kind (runtime/kinds.py) into `waiting`, as a wait node
is (it holds no worker): the claim computes its list (core/maps.items_of) and writes its
items in one statement (transitions.insert_items); a list that is not one, or too long,
fails the node at once, naming the expression and what it gave.

`advance_map` is the one step of a map, run under its run's row lock: failed items are
retried (backoff) or made dead (a dead letter each), the items due are claimed up to
`max_parallel` in flight and enqueued after commit in jobs of their own (`sym-` ids: never
taken with node jobs), and once no item is left open the node is gathered: succeeded with
the item outputs in order, or dead by a dead item under `on_item_failure: fail`. It runs
after the claim, in the worker after each job's items are stored, in the schedulers'
housekeeping for items whose backoff expired, and in the reconciler for maps a crash left
without a next step. Every step is conditional, so running it twice changes nothing more.

Work per item is O(1) in the number of items: a claim counts the items in flight
(an index of those only) and reads the next ones in order from the open items' index;
"anything left?" is one probe of that index; the gather reads the items once.

Crash safety, from PostgreSQL alone (`reconcile`): items queued whose job waits nowhere
are enqueued again; items running on a worker that stopped heart-beating are failed (then
retried or dead by the node's policy; a lost attempt is given back to the retry budget, as
a task's), and so are items that overran their timeout unreported under a live worker
(counted: a hang; a result its slots could not store); a waiting map with no item queued or running and
nothing finished lately is advanced again (a worker or a scheduler died between storing
results and the next step, or between the claim's commit and its enqueue).
"""

from __future__ import annotations

import json
import logging
import random
import uuid
from collections import defaultdict
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import redis
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from workflows import handlers
from workflows.core import engine, maps
from workflows.core.graph import Graph, Node
from workflows.core.states import NodeStatus as N
from workflows.core.waits import expression_output
from workflows.runtime import bus, jobs, rqcompat, transitions, transitions_maps
from workflows.runtime.transitions import Kill, Lost, MapNode, Retry
from workflows.store.errors import Invalid
from workflows.store.graphs import load_graph
from workflows.store.history import event
from workflows.store.models import DeadLetter, MapItem, RunEvent
from workflows.store.payloads import check_json_size, from_json
from workflows.store.statements import ITEMS, NODES, RUNS

log = logging.getLogger(__name__)

TASK = "workflows.runtime.tasks.run_map_items"
JOB_PREFIX = "sym-"
DUE_LIMIT = 200
OVERDUE_GRACE_SECONDS = 30  # as the reconciler's for task attempts

JobItem = tuple[int, int, int, str]  # an item's attempt in a job: (item id, attempt, version id, node id)


# --------------------------------------------------------------------------- entering a map


def enter_maps(rows: list[jobs.Ready], status: N, workers: int = 1) -> int:
    """Make ready map nodes (still in `status`) wait, with their items; return how many moved."""
    if not rows:
        return 0
    ids = [row.noderun_id for row in rows]
    lists = compute_lists(ids)
    with transaction.atomic():
        moved = transitions.enter_waits(status, ids, [None] * len(ids))
        started, ended = [], []
        for noderun_id, run_id, node_id, attempt, _ in moved:
            items, error, version_id = lists[noderun_id]
            node = MapNode(noderun_id, run_id, version_id, node_id, attempt)
            if error or not items:
                gather_at_once(node, error)
                ended.append(run_id)
                continue
            transitions.insert_items(noderun_id, run_id, json.dumps(items))
            started.append(node)
            RunEvent.objects.create(
                **event_fields("node.waiting", node, {"kind": "map", "items": len(items)})
            )
    transaction.on_commit(lambda: after_entering(started, ended, workers))
    return len(moved)


def compute_lists(ids: list[int]) -> dict[int, tuple[list[Any], str, int]]:
    """Each map node's items or why it has none, from its run input and predecessors' outputs."""
    claims = [row for row in transitions.read_inputs(ids, []) if row.kind == "claim"]
    graphs = {row.noderun_id: load_graph(row.version_id) for row in claims}
    upstream = {p for row in claims for p in graphs[row.noderun_id].predecessors(row.node_id)}
    outputs: dict[int, dict[str, Any]] = defaultdict(dict)
    if upstream:
        for row in transitions.read_inputs(ids, upstream):
            if row.kind == "output":
                outputs[row.run_id][row.node_id] = from_json(row.value)
    lists = {}
    for row in claims:
        graph = graphs[row.noderun_id]
        output = expression_output(outputs[row.run_id], graph.predecessors(row.node_id))
        expression = graph.nodes[row.node_id].map or ""
        items, error = maps.items_of(expression, from_json(row.value), output)
        lists[row.noderun_id] = (items, error, row.version_id)
    return lists


def gather_at_once(node: MapNode, error: str) -> None:
    """End a map whose list is empty (succeeded, []) or could not be computed (failed)."""
    if error:
        transitions.gather_map(node, N.FAILED, None, f"Node {node.node_id!r}: {error}.", {"status": N.FAILED})
    else:
        transitions.gather_map(node, N.SUCCEEDED, "[]", "", {"status": N.SUCCEEDED, "items": 0})


def after_entering(started: list[MapNode], ended: list[int], workers: int) -> None:
    if ended:
        bus.notify(ended)
    for node in started:
        advance_map(node.noderun_id, node.run_id, workers)


def event_fields(kind: str, node: MapNode, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "run_id": node.run_id,
        "kind": kind,
        "node_id": node.node_id,
        "attempt": node.attempt,
        "at": timezone.now(),
        "data": data,
    }


# --------------------------------------------------------------------------- one step of a map


def advance_map(noderun_id: int, run_id: int, workers: int = 1) -> None:
    """Retry or kill failed items, claim the next ones up to max_parallel, gather when done."""
    with transaction.atomic():
        node = transitions.lock_map(noderun_id, run_id)
        if node is None:
            return
        graph = load_graph(node.version_id)
        spec = graph.nodes[node.node_id]
        resolve_failed(node, graph)
        free = transitions.free_slots(node, spec.max_parallel)
        picked = transitions.pick_items(node, free) if free > 0 else []
        if picked:
            claim(node, spec, picked, workers)
        elif not transitions.has_open_items(node.noderun_id):
            gather(node, spec)


def resolve_failed(node: MapNode, graph: Graph) -> None:
    """Retry failed items within the node's retry budget; kill the others, filing their letters."""
    failed = transitions.failed_items(node.noderun_id)
    if not failed:
        return
    retries, kills = [], []
    for item_id, tries, retryable in failed:
        state = engine.NodeState(N.FAILED, tries, retryable=retryable)
        decision = engine.resolve_failure(graph, node.node_id, state, random.random())
        if isinstance(decision, engine.RetryNode):
            retries.append(Retry(item_id, tries, decision.delay))
        else:
            kills.append(Kill(item_id, tries))
    if retries:
        transitions.retry_items(retries)
    if kills:
        file_dead_letters(node, transitions.kill_items(kills))


def file_dead_letters(node: MapNode, item_ids: list[int]) -> None:
    """A dead letter per dead item: what it was given is its item, its index and the run input."""
    items = list(MapItem.objects.filter(pk__in=item_ids).order_by("index"))
    given = given_input(node)
    letters = [
        DeadLetter(
            run_id=node.run_id,
            node_run_id=node.noderun_id,
            node_id=node.node_id,
            attempt=item.attempt,
            error=item.error,
            traceback=item.traceback,
            input_snapshot={"item": item.item, "index": item.index, **given},
            map_item=item,
        )
        for item in items
    ]
    DeadLetter.objects.bulk_create(letters)
    RunEvent.objects.bulk_create(
        event(
            "node.item_dead", node.run_id, node.node_id, i.attempt, {"index": i.index, "error": i.error[:500]}
        )
        for i in items
    )


def given_input(node: MapNode) -> dict[str, Any]:
    rows = transitions.read_inputs([node.noderun_id], [])
    return {"input": from_json(rows[0].value)} if rows else {}


def claim(node: MapNode, spec: Node, picked: list[int], workers: int) -> None:
    """Claim these items into jobs; enqueue the jobs once the claim commits."""
    packed = pack(picked, handlers.get_handler(spec.handler).batchable, workers)
    claimed = transitions.claim_items(
        [i for ids in packed for i in ids], [j for ids in packed for j in new_job_ids(len(ids))]
    )
    enqueue_later(node, spec.queue, claimed)


def pack(ids: list[int], batchable: bool, workers: int) -> list[list[int]]:
    size = jobs.batch_size(len(ids), workers) if batchable else 1
    return [ids[start : start + size] for start in range(0, len(ids), size)]


def new_job_ids(count: int) -> list[str]:
    """One new job id for `count` items."""
    return [f"{JOB_PREFIX}{uuid.uuid4().hex}"] * count


def enqueue_later(node: MapNode, queue: str, claimed: Iterable[tuple[int, int, str]]) -> None:
    """Enqueue the claimed items' jobs once their claim commits."""
    by_job: dict[str, list[JobItem]] = defaultdict(list)
    for item_id, attempt, job_id in claimed:
        by_job[job_id].append((item_id, attempt, node.version_id, node.node_id))
    transaction.on_commit(lambda: enqueue(queue, by_job))


def enqueue(queue: str, by_job: dict[str, list[JobItem]]) -> None:
    """Push item jobs in one pipeline; if Redis refuses, the reconciler enqueues them again."""
    if not by_job:
        return
    try:
        rq = jobs.rq_queue(queue)
        pipe = rq.connection.pipeline()
        for job_id, items in by_job.items():
            rqcompat.push_job(pipe, rq, TASK, job_id, (items,), jobs.FAILED_JOB_TTL)
        pipe.execute()
    except redis.RedisError:
        log.warning("map item jobs were not enqueued; the reconciler will", exc_info=True)


def gather(node: MapNode, spec: Node) -> None:
    """End a map whose items have all finished: its outputs in order, failures by policy."""
    outputs, dead = [], []
    for index, status, output, error in (
        MapItem.objects.filter(node_run_id=node.noderun_id)
        .order_by("index")
        .values_list("index", "status", "output", "error")
    ):
        if status == N.SUCCEEDED:
            outputs.append(output)
        else:
            dead.append(index)
            outputs.append(maps.failed_item(index, error))
    span = {"status": "", "items": len(outputs), "failed": len(dead)}
    if maps.map_outcome(spec.on_item_failure, len(dead)) == N.DEAD:
        shown = ", ".join(map(str, dead[:10])) + (" ..." if len(dead) > 10 else "")
        error = f"Node {node.node_id!r}: {len(dead)} of {len(outputs)} items failed (items {shown})."
        transitions.gather_map(node, N.DEAD, None, error, {**span, "status": N.DEAD, "error": error})
    else:
        text = gathered_output(node, outputs)
        status = N.SUCCEEDED if text is not None else N.DEAD
        error = "" if text is not None else output_too_big(node)
        transitions.gather_map(node, status, text, error, {**span, "status": status})
    transaction.on_commit(lambda: bus.notify([node.run_id]))


def gathered_output(node: MapNode, outputs: list[Any]) -> str | None:
    limit = settings.SWITCHYARD["MAX_MAP_OUTPUT_BYTES"]
    try:
        return check_json_size(outputs, limit, f"The output of map node {node.node_id!r}")
    except Invalid:  # too big: said by output_too_big
        return None


def output_too_big(node: MapNode) -> str:
    limit = settings.SWITCHYARD["MAX_MAP_OUTPUT_BYTES"]
    return f"Node {node.node_id!r}: its items' outputs together exceed {limit:,} bytes (SWITCHYARD_MAX_MAP_OUTPUT_BYTES)."


# --------------------------------------------------------------------------- housekeeping and repair

DUE_ITEMS_SQL = f"""
SELECT DISTINCT node_run_id, run_id FROM (
    SELECT i.node_run_id, i.run_id FROM {ITEMS} i
    WHERE i.status = '{N.RETRYING}' AND i.due_at <= now() LIMIT %(limit)s
) AS due
"""

QUEUED_ITEMS_SQL = f"""
SELECT i.id, i.attempt, i.job_id, i.node_run_id, i.run_id FROM {ITEMS} i
WHERE i.status = '{N.QUEUED}' AND i.queued_at < %(cutoff)s LIMIT %(limit)s
"""

RUNNING_ITEMS_SQL = f"""
SELECT i.id, i.attempt, i.worker, i.node_run_id, i.run_id, i.started_at FROM {ITEMS} i
WHERE i.status = '{N.RUNNING}' AND i.started_at < %(cutoff)s LIMIT %(limit)s
"""

# Waiting map nodes with nothing queued or running and no item finished lately: their next
# step was lost (a worker or scheduler died between a commit and what follows it).
STALLED_MAPS_SQL = f"""
SELECT n.id, n.run_id FROM {NODES} n JOIN {RUNS} r ON r.id = n.run_id
WHERE n.status = '{N.WAITING}' AND r.status = 'running' AND n.started_at < %(cutoff)s
  AND EXISTS (SELECT FROM {ITEMS} i WHERE i.node_run_id = n.id)
  AND NOT EXISTS (
      SELECT FROM {ITEMS} i WHERE i.node_run_id = n.id
        AND (i.status IN ('{N.QUEUED}', '{N.RUNNING}') OR i.finished_at > %(cutoff)s))
LIMIT %(limit)s
"""


def query(sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cur:
        cur.execute(sql, params)
        found: list[tuple[Any, ...]] = cur.fetchall()
        return found


def advance_due(workers: int) -> int:
    """Step the maps whose items' backoff has expired (the schedulers' housekeeping)."""
    due = query(DUE_ITEMS_SQL, {"limit": DUE_LIMIT})
    for noderun_id, run_id in due:
        advance_map(noderun_id, run_id, workers)
    return len(due)


def reconcile(workers: int, dead_workers: Any, limit: int = 2000) -> dict[str, int]:
    """Repair what a crash left of maps (see the module docstring); return what was repaired."""
    after = settings.SWITCHYARD["RECONCILE_AFTER_SECONDS"]
    cutoff = timezone.now() - timedelta(seconds=after)
    return {
        "items_requeued": requeue_lost(cutoff, limit),
        "items_lost": fail_lost(dead_workers, limit, workers),
        "maps_redriven": redrive(cutoff, limit, workers),
    }


def requeue_lost(cutoff: Any, limit: int) -> int:
    rows = query(QUEUED_ITEMS_SQL, {"cutoff": cutoff, "limit": limit})
    if not rows:
        return 0
    queues = {r[3]: queue_of(r[3]) for r in rows}
    job_ids = sorted({(r[2], queues[r[3]]) for r in rows})
    waiting = dict(zip(job_ids, jobs.jobs_waiting(job_ids), strict=True))
    lost = [r for r in rows if not waiting[(r[2], queues[r[3]])]]
    if not lost:
        return 0
    by_parent: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    for row in lost:
        by_parent[row[3]].append(row)
    for noderun_id, group in by_parent.items():
        node = map_node(noderun_id)
        if node is None:
            continue
        with transaction.atomic():
            claimed = transitions.requeue_items(
                [g[0] for g in group], [g[1] for g in group], new_job_ids(len(group))
            )
            enqueue_later(node, queues[noderun_id], claimed)
    return len(lost)


def fail_lost(dead_workers: Any, limit: int, workers: int) -> int:
    """Fail running items whose worker died (not counted against their retries), or that
    overran their node's timeout unreported under a live worker (counted: a hang)."""
    now = timezone.now()
    cutoff = now - timedelta(seconds=settings.SWITCHYARD["WORKER_LOST_AFTER_SECONDS"])
    rows = query(RUNNING_ITEMS_SQL, {"cutoff": cutoff, "limit": limit})
    if not rows:
        return 0
    dead = dead_workers(sorted({r[2] for r in rows}))
    timeouts = {n: timeout_of(n) for n in {r[3] for r in rows if r[2] not in dead}}  # a few maps
    lost = []
    for item_id, attempt, worker, noderun_id, _, started_at in rows:
        timeout = timeouts.get(noderun_id)
        if worker in dead:
            reason = f"Worker {worker} stopped heart-beating during attempt {attempt}."
            lost.append(Lost(item_id, attempt, reason))
        elif timeout and started_at + timedelta(seconds=timeout + OVERDUE_GRACE_SECONDS) < now:
            reason = f"Attempt {attempt} on {worker} never reported, {timeout:g} s timeout long past."
            lost.append(Lost(item_id, attempt, reason, free=False))
    return fail_items(lost, workers)


def fail_items(lost: list[Lost], workers: int) -> int:
    """Fail these running items as lost, then step their maps (retry or kill); return how many."""
    if not lost:
        return 0
    failed = transitions.fail_lost_items(lost)
    for noderun_id, run_id in sorted(set(failed)):
        advance_map(noderun_id, run_id, workers)
    return len(failed)


def hand_back(worker: str, reason: str) -> int:
    """Fail a stopping worker's running items as lost now (retried elsewhere); return how many."""
    rows = MapItem.objects.filter(worker=worker, status=N.RUNNING).values_list("pk", "attempt")
    return fail_items([Lost(pk, attempt, reason) for pk, attempt in rows], 1)


def timeout_of(noderun_id: int) -> float | None:
    node = map_node(noderun_id)
    return load_graph(node.version_id).nodes[node.node_id].timeout_seconds if node else None


def redrive(cutoff: Any, limit: int, workers: int) -> int:
    stalled = query(STALLED_MAPS_SQL, {"cutoff": cutoff, "limit": limit})
    for noderun_id, run_id in stalled:
        advance_map(noderun_id, run_id, workers)
    return len(stalled)


def map_node(noderun_id: int) -> MapNode | None:
    rows = query(transitions_maps.MAP_NODE_SQL, {"id": noderun_id})
    return MapNode(noderun_id, *rows[0]) if rows else None


def queue_of(noderun_id: int) -> str:
    node = map_node(noderun_id)
    return load_graph(node.version_id).nodes[node.node_id].queue if node else "default"
