"""The status changes of map nodes and their items (the map-item lifecycle), with transitions.py.

A map node (core/maps.py, runtime/mapping.py) waits while its items run: each item is a
MapItem row that moves by the node table as a task's attempts do, by the same statements
(lifecycle.Attempts), guarded likewise by its status and attempt. Everything that claims items
or finishes the map node first locks the run row (`lock_map`), as a cancel and a replay do:
claims of one map never overlap, so `max_parallel` holds, and a cancel never meets a half-made
claim. Callers reach these functions through `transitions` (re-exported there).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from django.db import models as orm
from django.utils import timezone

from workflows.core.states import Cause, NodeStatus as N, RunStatus as R
from workflows.runtime.lifecycle import (
    COUNT_WAITS,
    LOCK_RUNS,
    RELAXED_COMMIT,
    RUNS_LOCKED,
    Attempts,
    Kill,
    Lost,
    Retry,
    check_move,
    execute,
    kill_params,
    lost_params,
    performs,
    retry_params,
    rows_of,
)
from workflows.store.models import MapItem, NodeRun, Run
from workflows.store.statements import EVENTS, ITEMS, NODES, RUNS

ITEM = Attempts(MapItem, "i")
OPEN = (N.PENDING, N.RETRYING, N.QUEUED, N.RUNNING, N.FAILED)  # mapitem_open_idx's statuses

LOCK_MAP_SQL = f"""
SELECT r.id FROM {RUNS} r WHERE r.id = %(run)s AND r.status = '{R.RUNNING}' FOR NO KEY UPDATE
"""

MAP_NODE_SQL = f"""
SELECT n.run_id, r.version_id, n.node_id, n.attempt FROM {NODES} n JOIN {RUNS} r ON r.id = n.run_id
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
    index: int  # type: ignore[assignment]  # the column is named index; rows never call tuple.index
    value: Any


def lock_map(noderun_id: int, run_id: int) -> MapNode | None:
    """Lock the run of a map node (inside a transaction); the node, if both still go on."""
    if not execute(LOCK_MAP_SQL, {"run": run_id}):
        return None
    rows = execute(MAP_NODE_SQL, {"id": noderun_id})  # read after the lock: a fresh snapshot
    return MapNode(noderun_id, *rows[0]) if rows else None


INSERT_ITEMS_SQL = f"""
INSERT INTO {ITEMS}
    (node_run_id, run_id, index, status, item, attempt, tries, job_id, worker, error, traceback)
SELECT %(id)s, %(run)s, i.ord - 1, '{N.PENDING}', i.value, 0, 0, '', '', '', ''
FROM jsonb_array_elements(%(items)s::jsonb) WITH ORDINALITY AS i(value, ord)
"""


@performs(Cause.CREATE, nodes={None: [N.PENDING]})
def insert_items(noderun_id: int, run_id: int, items_json: str) -> None:
    """Write a map node's items, pending, in one statement (a JSON array of up to MAX_ITEMS)."""
    execute(INSERT_ITEMS_SQL, {"id": noderun_id, "run": run_id, "items": items_json})


IN_FLIGHT_SQL = f"""
SELECT count(*) FROM {ITEMS} i
WHERE i.node_run_id = %(id)s AND i.status IN ('{N.QUEUED}', '{N.RUNNING}', '{N.FAILED}')
"""

# Served by mapitem_open_idx in item order: it skips at most the items in flight and those
# waiting for a backoff, however many items the map has.
PICK_ITEMS_SQL = f"""
SELECT i.id FROM {ITEMS} i
WHERE i.node_run_id = %(id)s
  AND i.status IN ({", ".join(f"'{s}'" for s in OPEN)})
  AND (i.status = '{N.PENDING}' OR (i.status = '{N.RETRYING}' AND i.due_at <= now()))
ORDER BY i.index LIMIT %(limit)s
FOR UPDATE SKIP LOCKED
"""

OPEN_ITEMS_SQL = f"""
SELECT EXISTS (SELECT FROM {ITEMS} i WHERE i.node_run_id = %(id)s
  AND i.status IN ({", ".join(f"'{s}'" for s in OPEN)}))
"""


def free_slots(node: MapNode, max_parallel: int) -> int:
    return max_parallel - int(execute(IN_FLIGHT_SQL, {"id": node.noderun_id})[0][0])


def pick_items(node: MapNode, limit: int) -> list[int]:
    """The ids of up to `limit` items due to run next, in item order."""
    return [row[0] for row in execute(PICK_ITEMS_SQL, {"id": node.noderun_id, "limit": limit})]


def has_open_items(noderun_id: int) -> bool:
    return bool(execute(OPEN_ITEMS_SQL, {"id": noderun_id})[0][0])


CLAIM_ITEMS_SQL = ITEM.claim(returning=ITEM.columns("id", "attempt", "job_id"))
REQUEUE_ITEMS_SQL = ITEM.requeue(returning=ITEM.columns("id", "attempt", "job_id"))


@performs(Cause.CLAIM, nodes={N.PENDING: [N.QUEUED], N.RETRYING: [N.QUEUED]})
def claim_items(ids: list[int], job_ids: list[str]) -> list[tuple[int, int, str]]:
    """Give items a new attempt, queued in its job (under `lock_map`); return (id, attempt, job id) each."""
    return execute(CLAIM_ITEMS_SQL, {"ids": ids, "job_ids": job_ids})


@performs(Cause.REQUEUE, nodes={N.QUEUED: [N.QUEUED]})
def requeue_items(ids: list[int], attempts: list[int], job_ids: list[str]) -> list[tuple[int, int, str]]:
    """Point queued items (same attempt) at new jobs; return (id, attempt, job id) each."""
    params = {"ids": ids, "attempts": attempts, "job_ids": job_ids}
    return execute(REQUEUE_ITEMS_SQL, params)


START_ITEMS_SQL = ITEM.start(
    clock="clock_timestamp()",
    joins=f", {RUNS} r, {RELAXED_COMMIT}",
    where=f" AND r.id = i.run_id AND r.status = '{R.RUNNING}'",
    returning=ITEM.columns("id", "attempt", "node_run", "run", "index", "item"),
)

FINISH_ITEMS_SQL = ITEM.finish(ITEM.status_in([N.RUNNING]), returning=ITEM.columns("node_run", "run"))


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
SELECT i.id, i.tries, i.retryable FROM {ITEMS} i
WHERE i.node_run_id = %(id)s AND i.status = '{N.FAILED}'
"""


def failed_items(noderun_id: int) -> list[tuple[int, int, bool]]:
    """(item id, tries, retryable) of the map node's failed items, awaiting a retry or death."""
    return execute(FAILED_ITEMS_SQL, {"id": noderun_id})


RETRY_ITEMS_SQL = ITEM.retry()
KILL_ITEMS_SQL = ITEM.kill(returning=ITEM.columns("id"))
LOST_ITEMS_SQL = ITEM.lose(returning=ITEM.columns("node_run", "run"))


@performs(Cause.RETRY, nodes={N.FAILED: [N.RETRYING]})
def retry_items(retries: Sequence[Retry]) -> None:
    """Make failed items wait for their backoff."""
    execute(RETRY_ITEMS_SQL, retry_params(retries))


@performs(Cause.DEAD, nodes={N.FAILED: [N.DEAD]})
def kill_items(kills: Sequence[Kill]) -> list[int]:
    """Mark failed items dead; return the ids of those still failed at those tries."""
    return [row[0] for row in execute(KILL_ITEMS_SQL, kill_params(kills))]


@performs(Cause.LOST, nodes={N.RUNNING: [N.FAILED]})
def fail_lost_items(lost: Sequence[Lost]) -> list[tuple[int, int]]:
    """Fail running items whose worker is gone; return (map node, run) of each."""
    return execute(LOST_ITEMS_SQL, lost_params(lost))


GATHER_SQL = f"""
WITH {LOCK_RUNS.format(ids="ARRAY[%(id)s::bigint]")},
moved AS (
UPDATE {NODES} n
SET status = %(status)s, output = %(output)s::jsonb, error = %(error)s, finished_at = now(), due_at = NULL
WHERE n.id = %(id)s AND n.attempt = %(attempt)s AND n.status = '{N.WAITING}' AND {RUNS_LOCKED}
RETURNING n.id, n.run_id, n.node_id, n.attempt, n.status, n.started_at, n.finished_at
), {COUNT_WAITS.format(sign="-")},
history AS (
    INSERT INTO {EVENTS} (run_id, kind, node_id, attempt, at, started_at, worker, data)
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
        status=N.RETRYING, tries=0, retryable=True, finished_at=None, due_at=timezone.now(), **edits
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
