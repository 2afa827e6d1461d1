"""Per-key figures of a workflow that declares flow control (core/flowcontrol.py): attempts in
flight and held per concurrency key, runs running and waiting per debounce or singleton key.

Read from PostgreSQL only (the node rows' `flow_key`, the runs' `start_key`), the same rows
admission counts, so the page shows what the schedulers decide from. Keys come busiest first,
at most SHOWN of each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection

from workflows.core.flowcontrol import WORKFLOW_SCOPE, split_bucket
from workflows.core.graph import Graph
from workflows.core.states import NodeStatus, RunStatus
from workflows.store.statements import NODES, RUNS, WORKFLOWS

SHOWN = 50

KEYS_SQL = f"""
SELECT n.flow_key,
       count(*) FILTER (WHERE n.status IN ('{NodeStatus.QUEUED}', '{NodeStatus.RUNNING}', '{NodeStatus.WAITING}')),
       count(*) FILTER (WHERE n.status = '{NodeStatus.PENDING}')
FROM {NODES} n JOIN {RUNS} r ON r.id = n.run_id
WHERE n.flow_key IS NOT NULL AND r.workflow_id = %(workflow)s
  AND n.status IN ('{NodeStatus.PENDING}', '{NodeStatus.QUEUED}', '{NodeStatus.RUNNING}', '{NodeStatus.WAITING}')
GROUP BY n.flow_key ORDER BY count(*) DESC, n.flow_key LIMIT %(shown)s
"""

STARTS_SQL = f"""
SELECT start_key,
       count(*) FILTER (WHERE status IN ('{RunStatus.RUNNING}', '{RunStatus.COMPENSATING}')),
       count(*) FILTER (WHERE status = '{RunStatus.WAITING}')
FROM {RUNS}
WHERE workflow_id = %(workflow)s AND start_key IS NOT NULL
  AND status IN ('{RunStatus.RUNNING}', '{RunStatus.COMPENSATING}', '{RunStatus.WAITING}')
GROUP BY start_key ORDER BY count(*) DESC, start_key LIMIT %(shown)s
"""


BUSIEST_SQL = f"""
SELECT w.slug, n.flow_key,
       count(*) FILTER (WHERE n.status IN ('{NodeStatus.QUEUED}', '{NodeStatus.RUNNING}', '{NodeStatus.WAITING}')),
       count(*) FILTER (WHERE n.status = '{NodeStatus.PENDING}')
FROM {NODES} n JOIN {RUNS} r ON r.id = n.run_id JOIN {WORKFLOWS} w ON w.id = r.workflow_id
WHERE n.flow_key IS NOT NULL
  AND n.status IN ('{NodeStatus.PENDING}', '{NodeStatus.QUEUED}', '{NodeStatus.RUNNING}', '{NodeStatus.WAITING}')
GROUP BY w.slug, n.flow_key ORDER BY count(*) DESC, w.slug, n.flow_key LIMIT %(shown)s
"""


@dataclass(frozen=True)
class KeyFigure:
    scope: str  # a node id, or "workflow"
    key: str
    in_flight: int
    waiting: int
    limit: int | None


def declares_keys(graph: Graph) -> bool:
    return bool(graph.debounce or graph.singleton or any(n.concurrency for n in graph.nodes.values()))


def concurrency_figures(workflow_id: int, graph: Graph) -> list[KeyFigure]:
    """In flight and held per concurrency key of a workflow, busiest first."""
    with connection.cursor() as cur:
        cur.execute(KEYS_SQL, {"workflow": workflow_id, "shown": SHOWN})
        rows = cur.fetchall()
    figures = []
    for stored, in_flight, waiting in rows:
        scope, key = split_bucket(stored)
        figures.append(KeyFigure(scope_label(scope), key, in_flight, waiting, limit_of(graph, scope)))
    return figures


def start_figures(workflow_id: int) -> list[KeyFigure]:
    """Runs running and waiting per debounce or singleton key, busiest first."""
    with connection.cursor() as cur:
        cur.execute(STARTS_SQL, {"workflow": workflow_id, "shown": SHOWN})
        return [KeyFigure("starts", key, running, waiting, None) for key, running, waiting in cur.fetchall()]


def scope_label(scope: str) -> str:
    return "workflow" if scope == WORKFLOW_SCOPE else scope


def limit_of(graph: Graph, scope: str) -> int | None:
    """The limit the active version sets for a scope (older versions may have had another)."""
    for node in graph.nodes.values():
        if node.concurrency is not None and node.concurrency.scope == scope:
            return node.concurrency.limit
    return None


def card_context(workflow_id: int, graph: Graph | None) -> dict[str, Any]:
    """What templates/monitoring/fragments/flow_keys.html shows."""
    if graph is None or not declares_keys(graph):
        return {"flow_declared": False}
    return {
        "flow_declared": True,
        "flow_keys": concurrency_figures(workflow_id, graph),
        "flow_starts": start_figures(workflow_id),
        "flow_start_kind": "debounce" if graph.debounce else "singleton" if graph.singleton else "",
    }


def busiest_keys(shown: int = 10) -> list[tuple[str, KeyFigure]]:
    """(workflow slug, figure) of the busiest concurrency keys over every workflow."""
    with connection.cursor() as cur:
        cur.execute(BUSIEST_SQL, {"shown": shown})
        rows = cur.fetchall()
    found = []
    for slug, stored, in_flight, waiting in rows:
        scope, key = split_bucket(stored)
        found.append((slug, KeyFigure(scope_label(scope), key, in_flight, waiting, None)))
    return found
