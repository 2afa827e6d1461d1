"""Map items inside a worker: start a job's items, run the handler on each, store, step the map.

The worker side of runtime/mapping.py: an item job (`sym-` id) carries (item id, attempt,
version id, node id) tuples; its items are started in one statement, each run under the
node's timeout with `ctx.item` and `ctx.index`, their results stored in one statement, and
then each of their maps takes its next step (mapping.advance_map) in this process, so the
next items are claimed without a round trip through the scheduler.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

from django.conf import settings
from django.utils import timezone

from workflows import handlers
from workflows.core.graph import Graph
from workflows.runtime import bus, execution, mapping, transitions
from workflows.runtime.transitions import ItemRow
from workflows.store.graphs import load_graph
from workflows.store.payloads import from_json


def run_items(items: list[mapping.JobItem], worker: str) -> int:
    """Execute a job's items: start them, run the handler on each, store, step their maps."""
    started = transitions.start_items(worker, [i[0] for i in items], [i[1] for i in items])
    if not started:
        return 0
    where = {item_id: (version_id, node_id) for item_id, _, version_id, node_id in items}
    given = inputs_of(started, where)
    results = [run_item(row, *where[row.item_id], given[row.noderun_id], worker) for row in started]
    for noderun_id, run_id in sorted(transitions.finish_items(results)):
        mapping.advance_map(noderun_id, run_id, bus_workers())
    return len(started)


def inputs_of(
    started: list[ItemRow], where: dict[int, tuple[int, str]]
) -> dict[int, tuple[Any, dict[str, Any]]]:
    """Map node id -> (its run input, its predecessors' outputs)."""
    parents = {row.noderun_id: where[row.item_id] for row in started}
    upstream = {
        p for version_id, node_id in parents.values() for p in load_graph(version_id).predecessors(node_id)
    }
    given: dict[int, Any] = {}
    outputs: dict[int, dict[str, Any]] = defaultdict(dict)
    for row in transitions.read_inputs(list(parents), upstream):
        if row.kind == "claim":
            given[row.noderun_id] = from_json(row.value)
        else:
            outputs[row.run_id][row.node_id] = from_json(row.value)
    runs = {row.noderun_id: row.run_id for row in started}
    return {i: (given.get(i), outputs[runs[i]]) for i in parents}


def run_item(
    row: ItemRow, version_id: int, node_id: str, given: tuple[Any, dict[str, Any]], worker: str
) -> dict[str, Any]:
    graph: Graph = load_graph(version_id)
    node = graph.nodes[node_id]
    run_input, outputs = given
    ctx = handlers.NodeContext(
        run_id=row.run_id,
        node_id=node_id,
        attempt=row.attempt,
        idempotency_key=f"{row.run_id}:{node_id}[{row.index}]:{row.attempt}",
        input=run_input,
        upstream={p: outputs[p] for p in graph.predecessors(node_id) if p in outputs},
        config=node.config,
        deadline=time.monotonic() + node.timeout_seconds,
        item=from_json(row.value),
        index=row.index,
    )
    started = timezone.now()
    outcome = execution.redacted(execution.run_attempt(node, ctx, f"item {row.index} of node {node_id!r}"))
    return {
        "id": row.item_id,
        "attempt": row.attempt,
        "status": outcome.status,
        "output": outcome.output,
        "error": outcome.error,
        "traceback": outcome.traceback,
        "retryable": outcome.retryable,
        "started_at": started.isoformat(),
        "finished_at": timezone.now().isoformat(),
    }


_workers_seen = [0.0, 1]  # when the live workers were last counted, and how many


def bus_workers() -> int:
    """The live workers, counted at most once a second (item jobs are packed for them)."""
    if time.monotonic() - _workers_seen[0] > 1.0:
        live = bus.live_workers(settings.SWITCHYARD["WORKER_LOST_AFTER_SECONDS"])
        _workers_seen[:] = [time.monotonic(), max(1, len(live))]
    return int(_workers_seen[1])
