"""Per-node concurrency caps: at most `max_in_flight` attempts of a node queued or running at
once, over every run of its workflow (whatever version they run).

Checked where nodes are claimed (`jobs.claim_and_enqueue`), inside one transaction that holds
an advisory lock per (workflow, node): two schedulers never admit more than a cap between
them. A ready node that does not fit stays pending, marked held (`due_at` = when it was first
held); the schedulers' housekeeping offers held nodes again, oldest first, several times a
second (`advancing.enqueue_due`). A start whose roots are capped leaves them to a scheduler.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import connection

if TYPE_CHECKING:
    from workflows.jobs import Ready

KEYS_SQL = """
SELECT n.id, r.workflow_id, n.node_id FROM workflows_noderun n JOIN workflows_run r ON r.id = n.run_id
WHERE n.id = ANY(%(ids)s::bigint[])
"""

LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtextextended('sy:cap:' || %s || ':' || %s, 0))"

# Statuses spelled out, not parameters: the partial in-flight index serves generic plans.
IN_FLIGHT_SQL = """
SELECT r.workflow_id, n.node_id, count(*) FROM workflows_noderun n JOIN workflows_run r ON r.id = n.run_id
WHERE n.status IN ('queued', 'running') AND n.node_id = ANY(%(nodes)s::text[])
  AND r.workflow_id = ANY(%(workflows)s::bigint[])
GROUP BY r.workflow_id, n.node_id
"""

HOLD_SQL = """
UPDATE workflows_noderun SET due_at = coalesce(due_at, now())
WHERE id = ANY(%(ids)s::bigint[]) AND status = 'pending'
"""


def admit(rows: list[Ready]) -> list[Ready]:
    """Return the capped rows that fit under their caps now, oldest node first; hold the rest.

    Call it inside the transaction that claims what it returns: the locks it takes keep
    another scheduler from counting the same free places until that transaction ends.
    """
    with connection.cursor() as cur:
        cur.execute(KEYS_SQL, {"ids": [row.noderun_id for row in rows]})
        key_of = {noderun_id: (workflow_id, node_id) for noderun_id, workflow_id, node_id in cur.fetchall()}
        keys = sorted(set(key_of.values()))
        for workflow_id, node_id in keys:  # in one order everywhere: no deadlock between schedulers
            cur.execute(LOCK_SQL, [str(workflow_id), node_id])
        cur.execute(
            IN_FLIGHT_SQL,
            {"nodes": sorted({n for _, n in keys}), "workflows": sorted({w for w, _ in keys})},
        )
        in_flight = {(workflow_id, node_id): count for workflow_id, node_id, count in cur.fetchall()}
        admitted, held = [], []
        for row in sorted(rows, key=lambda r: r.noderun_id):
            key = key_of.get(row.noderun_id)
            if key is None:
                continue  # the run is gone
            if in_flight.get(key, 0) < row.cap:
                in_flight[key] = in_flight.get(key, 0) + 1
                admitted.append(row)
            else:
                held.append(row.noderun_id)
        if held:
            cur.execute(HOLD_SQL, {"ids": held})
    return admitted
