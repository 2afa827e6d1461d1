"""Per-node limits, over every run of a workflow (whatever version they run):
- a concurrency cap, `max_in_flight`: at most that many attempts queued, running or
  waiting at once, counted in Postgres. An attempt holds its place until it ends, its
  waits included (an approval, an event, a child run, an agent's workflow tool call): an
  agent attempt resumed after its tool's child run needs no place, since it never gave one up;
- a rate limit, `rate_limit: {count, per_seconds}`: at most `count` attempts started in any
  window of `per_seconds`, counted in a Redis sorted set of recent starts. Like everything in
  Redis it is no one's only copy: a Redis restarted empty forgets one window, which may then
  let up to `count` more attempts start.

Both are checked where nodes are claimed (`jobs.claim_and_enqueue`), inside one transaction
that holds an advisory lock per (workflow, node): two schedulers never admit more than a limit
between them. A ready node that does not fit stays pending, marked held (`due_at` = when it
was first held); the schedulers' housekeeping offers held nodes again, highest effective
priority first (the run's priority aged by the time held; core/priorities.py), several times
a second (`advancing.enqueue_due`). A start whose roots are limited leaves them to a
scheduler. Where versions disagree on a node's rate limit, its oldest waiting row's applies.

Concurrency keys (`concurrency: {key, limit}`, core/flowcontrol.py) are a third limit, per
key value (runtime/flowkeys.py): at most `limit` attempts in flight per value. Rows are
considered round-robin between key values (flowcontrol.fair_order), each value's in priority
order, and held rows are offered again per (workflow, node, key) in turns
(advancing.DUE_SQL): a key holding most of the waiting attempts takes its own places, never
the turns of the others.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

from django.db import connection

from workflows.core import priorities
from workflows.core.flowcontrol import fair_order
from workflows.core.states import NodeStatus
from workflows.runtime import bus, flowkeys
from workflows.store.statements import NODES, RUNS

if TYPE_CHECKING:
    from workflows.core.graph import RateLimit
    from workflows.runtime.jobs import Ready

Key = tuple[int, str]  # (workflow id, node id)

KEYS_SQL = f"""
SELECT n.id, r.workflow_id, n.node_id, r.priority, extract(epoch FROM now() - coalesce(n.due_at, now()))
FROM {NODES} n JOIN {RUNS} r ON r.id = n.run_id
WHERE n.id = ANY(%(ids)s::bigint[])
"""

LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtextextended('sy:cap:' || %s || ':' || %s, 0))"

# Statuses spelled out, not parameters: the partial in-flight index serves generic plans.
IN_FLIGHT_SQL = f"""
SELECT r.workflow_id, n.node_id, count(*) FROM {NODES} n JOIN {RUNS} r ON r.id = n.run_id
WHERE n.status IN ('{NodeStatus.QUEUED}', '{NodeStatus.RUNNING}', '{NodeStatus.WAITING}')
  AND n.node_id = ANY(%(nodes)s::text[])
  AND r.workflow_id = ANY(%(workflows)s::bigint[])
GROUP BY r.workflow_id, n.node_id
"""

# Not a status change: a held node stays pending, marked held.
HOLD_SQL = f"""
UPDATE {NODES} SET due_at = coalesce(due_at, now())
WHERE id = ANY(%(ids)s::bigint[]) AND status = '{NodeStatus.PENDING}'
"""


def admit(rows: list[Ready]) -> list[Ready]:
    """Return the limited rows that fit under their limits now, highest effective priority
    first (core/priorities.effective), then oldest; hold the rest (rows whose run is gone are
    dropped).

    Call it inside the transaction that claims what it returns: the locks it takes keep
    another scheduler from counting the same free places until that transaction ends.
    """
    with connection.cursor() as cur:
        cur.execute(KEYS_SQL, {"ids": [row.noderun_id for row in rows]})
        found = cur.fetchall()
        key_of = {noderun_id: (workflow_id, node_id) for noderun_id, workflow_id, node_id, _, _ in found}
        rank = {row[0]: -priorities.effective(row[3], float(row[4])) for row in found}
        keys = sorted(set(key_of.values()))
        for workflow_id, node_id in keys:  # in one order everywhere: no deadlock between schedulers
            cur.execute(LOCK_SQL, [str(workflow_id), node_id])
        cur.execute(
            IN_FLIGHT_SQL,
            {"nodes": sorted({n for _, n in keys}), "workflows": sorted({w for w, _ in keys})},
        )
        in_flight = {(workflow_id, node_id): count for workflow_id, node_id, count in cur.fetchall()}
        keyed = [row for row in rows if row.flow is not None and row.noderun_id in key_of]
        flow_of = flowkeys.keys_of(cur, keyed) if keyed else {}
        flow_in_flight = flowkeys.in_flight(cur, set(flow_of.values())) if flow_of else {}
        now = time.time()
        waiting = sorted(
            (row for row in rows if row.noderun_id in key_of),
            key=lambda r: (rank[r.noderun_id], r.noderun_id),
        )
        if flow_of:
            waiting = fair_order(waiting, lambda r: flow_of.get(r.noderun_id))
        rates: dict[Key, RateLimit] = {}
        for row in waiting:
            if row.rate is not None:
                rates.setdefault(key_of[row.noderun_id], row.rate)
        started = recent_starts(rates, now)
        admitted, held, starts = [], [], []
        for row in waiting:
            key = key_of[row.noderun_id]
            fits_cap = row.cap is None or in_flight.get(key, 0) < row.cap
            fits_rate = key not in rates or started[key] < rates[key].count
            flow = flow_of.get(row.noderun_id)
            fits_key = flow is None or row.flow is None or flow_in_flight.get(flow, 0) < row.flow.limit
            if fits_cap and fits_rate and fits_key:
                in_flight[key] = in_flight.get(key, 0) + 1
                if flow is not None:
                    flow_in_flight[flow] = flow_in_flight.get(flow, 0) + 1
                if key in rates:
                    started[key] += 1
                    starts.append((key, row.noderun_id))
                admitted.append(row)
            else:
                held.append(row.noderun_id)
        if held:
            cur.execute(HOLD_SQL, {"ids": held})
    record_starts(starts, rates, now)
    return admitted


def recent_starts(rates: dict[Key, RateLimit], now: float) -> dict[Key, int]:
    """How many attempts of each rate-limited node started within its window."""
    if not rates:
        return {}
    pipe = bus.client().pipeline(transaction=False)
    for key, rate in rates.items():
        pipe.zremrangebyscore(bus.rate_key(*key), "-inf", now - rate.per_seconds)
        pipe.zcard(bus.rate_key(*key))
    counts = pipe.execute()[1::2]
    return dict(zip(rates, counts, strict=True))


def record_starts(starts: list[tuple[Key, int]], rates: dict[Key, RateLimit], now: float) -> None:
    """Count these admitted attempts in their nodes' windows. Written before the claim
    commits: a claim that then fails only leaves its window fuller (the safe side)."""
    if not starts:
        return
    pipe = bus.client().pipeline(transaction=False)
    for key, noderun_id in starts:
        pipe.zadd(bus.rate_key(*key), {f"{noderun_id}:{now}": now})
    for key in {key for key, _ in starts}:
        pipe.expire(bus.rate_key(*key), math.ceil(rates[key].per_seconds) + 1)
    pipe.execute()
