"""Concurrency keys at admission: each keyed attempt's key value, and what is in flight per key.

capacity.admit calls this for the ready rows whose node declares `concurrency` (its own or
its workflow's, core/flowcontrol.py); rows of other nodes never reach it, so a workflow that
declares no key pays no statement here. Counts are read from PostgreSQL (node rows queued,
running or waiting under a key), never kept anywhere else: an attempt that ends, fails as
lost after a kill -9 or is cancelled frees its place by its status alone, nothing can leak.
Two schedulers admitting the same key are serialised by an advisory lock per (workflow, key).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from workflows.core.flowcontrol import bucket, resolve_key
from workflows.core.states import NodeStatus
from workflows.store.statements import NODES, RUNS

if TYPE_CHECKING:
    from django.db.backends.utils import CursorWrapper

    from workflows.runtime.jobs import Ready

FlowKey = tuple[int, str]  # (workflow id, stored key "<scope>:<value>")

# What a keyed attempt's key may read: its run's input (a replay's edited input first) and
# its predecessors' outputs.
GIVEN_SQL = f"""
SELECT n.id, r.workflow_id, coalesce(n.input_override, r.input),
       (SELECT coalesce(jsonb_object_agg(u.node_id, u.output), '{{}}'::jsonb) FROM {NODES} u
        WHERE u.run_id = n.run_id AND u.node_id = ANY(%(upstream)s::text[]) AND u.status = '{NodeStatus.SUCCEEDED}')
FROM {NODES} n JOIN {RUNS} r ON r.id = n.run_id
WHERE n.id = ANY(%(ids)s::bigint[])
"""

STORE_SQL = f"""
UPDATE {NODES} n SET flow_key = v.flow_key
FROM unnest(%(ids)s::bigint[], %(keys)s::text[]) AS v(id, flow_key)
WHERE n.id = v.id AND n.flow_key IS DISTINCT FROM v.flow_key
"""

LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtextextended('sy:key:' || %s || ':' || %s, 0))"

# Statuses spelled out, not parameters: the partial index serves generic plans.
IN_FLIGHT_SQL = f"""
SELECT r.workflow_id, n.flow_key, count(*) FROM {NODES} n JOIN {RUNS} r ON r.id = n.run_id
WHERE n.flow_key = ANY(%(keys)s::text[])
  AND n.status IN ('{NodeStatus.QUEUED}', '{NodeStatus.RUNNING}', '{NodeStatus.WAITING}')
  AND r.workflow_id = ANY(%(workflows)s::bigint[])
GROUP BY r.workflow_id, n.flow_key
"""


def keys_of(cur: CursorWrapper, rows: list[Ready]) -> dict[int, FlowKey]:
    """Resolve and store the key of each keyed row (noderun id -> (workflow id, key)).

    Rows whose run is gone are left out.
    """
    upstream = sorted(
        {row.flow.key.split(".")[1] for row in rows if row.flow and row.flow.key.startswith("upstream.")}
    )
    cur.execute(GIVEN_SQL, {"ids": [row.noderun_id for row in rows], "upstream": upstream})
    given: dict[int, tuple[int, Any, Any]] = {
        i: (w, parsed(run_input), parsed(outputs)) for i, w, run_input, outputs in cur.fetchall()
    }
    keys: dict[int, FlowKey] = {}
    for row in rows:
        if row.flow is None or row.noderun_id not in given:
            continue
        workflow_id, run_input, outputs = given[row.noderun_id]
        value = resolve_key(row.flow.key, run_input, outputs, row.flow.default)
        keys[row.noderun_id] = (workflow_id, bucket(row.flow.scope, value))
    if keys:
        cur.execute(STORE_SQL, {"ids": list(keys), "keys": [k for _, k in keys.values()]})
    return keys


def parsed(value: Any) -> Any:
    """A jsonb value as Django's connection returns it (text) or as psycopg's would (parsed)."""
    return json.loads(value) if isinstance(value, str) else value


def in_flight(cur: CursorWrapper, keys: set[FlowKey]) -> dict[FlowKey, int]:
    """Lock these keys (in one order everywhere) and count their attempts in flight."""
    for workflow_id, key in sorted(keys):
        cur.execute(LOCK_SQL, [str(workflow_id), key])
    cur.execute(
        IN_FLIGHT_SQL,
        {"keys": sorted({k for _, k in keys}), "workflows": sorted({w for w, _ in keys})},
    )
    return {(workflow_id, key): count for workflow_id, key, count in cur.fetchall()}
