"""Map items inside a worker: start a job's items, run the handler on each, store, step the map.

The worker side of runtime/mapping.py: an item job (`sym-` id) carries (item id, attempt,
version id, node id) tuples; its items are started in one statement, each run under the
node's timeout with `ctx.item` and `ctx.index`, their results stored in one statement, and
then each of their maps takes its next step (mapping.advance_map) in this process, so the
next items are claimed without a round trip through the scheduler.

Items whose handler is I/O-bound (kinds.is_io_bound: llm.chat, http.request) run on the
worker's slots (runtime/slots.py) when it has some, with a task attempt's guarantees there:
- started (queued -> running, on this worker) by the same statement in the main thread, so
  they belong to its heartbeat: when the process dies the reconciler fails them as lost,
  given back to their retry budget (mapping.fail_lost), and a drain's deadline hands them
  back (mapping.hand_back);
- each run by the handler's coroutine under the node's timeout (slots.attempt_on_loop),
  taking a slot (`Slots.take`) from its submit until its result is stored;
- stored by `OnSlots.flush`, one statement for the items that ended in the last
  FLUSH_AFTER_SECONDS, then their maps stepped, and only then the slots given back: a drain
  that waits for free slots ends with every item stored and every map's next items claimed.
A max_parallel of 200 on a worker of 100 slots runs 100 items at once on it (the worker pops
no job without a free slot); the claims, and so max_parallel, are the map's (advance_map),
whichever path runs its items. CPU-bound items, and every item on a worker without slots,
run one at a time in the main thread under SIGALRM, as before. An item's calls pass the LLM
gates (budgets, provider health) and are recorded and replayed under its map node's attempt
(NodeContext.recorded_as); a gate never holds an item: it fails instead (admission.Call.may_hold).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from workflows import handlers
from workflows.core.graph import Graph, Node
from workflows.runtime import bus, execution, kinds, mapping, offload, slots as slots_module, transitions
from workflows.runtime.execution import Outcome
from workflows.runtime.outages import STORES_AWAY, Outage
from workflows.runtime.slots import Slots
from workflows.runtime.transitions import ItemRow
from workflows.store.graphs import load_graph
from workflows.store.payloads import from_json

log = logging.getLogger(__name__)


def run_items(items: list[mapping.JobItem], worker: str, slots: Slots | None = None) -> int:
    """Execute a job's items: start them, run each (on `slots` if I/O-bound), store, step their maps.

    Items handed to the slots are stored by them (`OnSlots`); this returns without waiting.
    """
    started = transitions.start_items(worker, [i[0] for i in items], [i[1] for i in items])
    if not started:
        return 0
    where = {item_id: (version_id, node_id) for item_id, _, version_id, node_id in items}
    # Read again when a restart cuts the connection: the items are running on this live
    # worker now, and dropped they would wait for the reconciler's overdue check.
    given = execution.when_up(
        f"worker {worker}: reading {len(started)} map items' inputs", inputs_of, started, where
    )
    results: list[dict[str, Any]] = []
    for row in started:
        graph = load_graph(where[row.item_id][0])
        node = graph.nodes[where[row.item_id][1]]
        ctx = context_of(row, graph, node, given[row.noderun_id])
        if slots is not None and kinds.is_io_bound(node):
            on_slots(slots).submit(row, node, ctx)
        else:
            results.append(run_item(row, node, ctx))
    if results:
        what = f"worker {worker}: storing {len(results)} map items"
        advance_maps(execution.when_up(what, transitions.finish_items, results))
    return len(started)


def inputs_of(
    started: list[ItemRow], where: dict[int, tuple[int, str]]
) -> dict[int, tuple[Any, dict[str, Any], int]]:
    """Map node id -> (its run input, its predecessors' outputs, its attempt)."""
    parents = {row.noderun_id: where[row.item_id] for row in started}
    upstream = {
        p for version_id, node_id in parents.values() for p in load_graph(version_id).predecessors(node_id)
    }
    given: dict[int, tuple[Any, int]] = {}
    outputs: dict[int, dict[str, Any]] = defaultdict(dict)
    for row in transitions.read_inputs(list(parents), upstream):
        if row.kind == "claim":
            given[row.noderun_id] = (from_json(row.value), row.attempt)
        else:
            outputs[row.run_id][row.node_id] = from_json(row.value)
    runs = {row.noderun_id: row.run_id for row in started}
    found = {i: given.get(i, (None, 0)) for i in parents}
    return {i: (run_input, outputs[runs[i]], attempt) for i, (run_input, attempt) in found.items()}


def context_of(
    row: ItemRow, graph: Graph, node: Node, given: tuple[Any, dict[str, Any], int]
) -> handlers.NodeContext:
    """What the item's handler reads; its deadline starts now. Its LLM calls pass the gates
    under its map node's attempt (NodeContext.map_attempt)."""
    run_input, outputs, node_attempt = given
    return handlers.NodeContext(
        run_id=row.run_id,
        node_id=node.id,
        attempt=row.attempt,
        idempotency_key=f"{row.run_id}:{node.id}[{row.index}]:{row.attempt}",
        input=run_input,
        upstream={p: outputs[p] for p in graph.predecessors(node.id) if p in outputs},
        config=node.config,
        deadline=time.monotonic() + node.timeout_seconds,
        item=from_json(row.value),
        index=row.index,
        map_attempt=(row.noderun_id, node_attempt),
    )


def what_of(row: ItemRow, node: Node) -> str:
    return f"item {row.index} of node {node.id!r}"


def run_item(row: ItemRow, node: Node, ctx: handlers.NodeContext) -> dict[str, Any]:
    """Run one item in this thread under the node's time limit (SIGALRM); return its result row."""
    started = timezone.now()
    outcome = execution.run_attempt(node, ctx, what_of(row, node))
    return result_of(row, outcome, started, timezone.now())


def result_of(row: ItemRow, outcome: Outcome, started: datetime, finished: datetime) -> dict[str, Any]:
    """An item's result as a row of transitions.FINISH_ITEMS_SQL's results."""
    outcome = execution.redacted(outcome)
    return {
        "id": row.item_id,
        "attempt": row.attempt,
        "status": outcome.status,
        "output": outcome.output,
        "error": outcome.error,
        "traceback": outcome.traceback,
        "retryable": outcome.retryable,
        "started_at": started.isoformat(),
        "finished_at": finished.isoformat(),
    }


def advance_maps(maps: Iterable[tuple[int, int]]) -> None:
    """Step each (map node, run) whose items were just stored."""
    for noderun_id, run_id in sorted(maps):
        mapping.advance_map(noderun_id, run_id, bus_workers())


# --------------------------------------------------------------------------- items on the slots


class OnSlots:
    """A worker's slots running map items: each item holds a slot until its result is stored."""

    def __init__(self, slots: Slots) -> None:
        self.slots = slots
        self.results: list[dict[str, Any]] = []  # ended, not yet stored (touched on the loop only)
        self.outage = Outage(f"the map items on the slots of worker {slots.worker}", log)
        asyncio.run_coroutine_threadsafe(self.flush_forever(), slots.loop)

    def submit(self, row: ItemRow, node: Node, ctx: handlers.NodeContext) -> None:
        """Run a started item in a slot (main thread); return at once."""
        self.slots.take()
        asyncio.run_coroutine_threadsafe(self.run(row, node, ctx), self.slots.loop)

    async def run(self, row: ItemRow, node: Node, ctx: handlers.NodeContext) -> None:
        started = timezone.now()
        outcome = await slots_module.attempt_on_loop(node, ctx, what_of(row, node))
        self.results.append(result_of(row, outcome, started, timezone.now()))

    async def flush_forever(self) -> None:
        while True:
            await asyncio.sleep(execution.FLUSH_AFTER_SECONDS)
            if self.results:
                await self.flush()

    async def flush(self) -> None:
        """Store the items that ended, step their maps, then give their slots back."""
        results, self.results = self.results, []
        try:
            stored = await offload.run_sync(transitions.finish_items, results)
        except STORES_AWAY as exc:
            # Kept for the next flush once the store is back; their slots stay taken meanwhile.
            slots_module.connections_cut()
            self.results[:0] = results
            await asyncio.sleep(self.outage.failed(exc))
            return
        except Exception:
            # Not stored for another reason: the items stay running under a live worker, and
            # the reconciler fails them once their timeout is past (mapping.fail_lost).
            log.exception("slots of worker %s: %d map items not stored", self.slots.worker, len(results))
            await offload.run_sync(close_old_connections)
            stored = set()
        self.outage.ok()
        try:
            await offload.run_sync(advance_maps, stored)
        except Exception:
            # The items are stored: a map left without its next step is stepped by the
            # reconciler (mapping.redrive).
            log.exception("slots of worker %s: maps not stepped after their items", self.slots.worker)
        finally:
            self.slots.give_back(len(results))


_on_slots: OnSlots | None = None  # the items' side of this process's slots (main thread)


def on_slots(slots: Slots) -> OnSlots:
    """The items' side of these slots, started with the first item handed to them."""
    global _on_slots
    if _on_slots is None or _on_slots.slots is not slots:
        _on_slots = OnSlots(slots)
    return _on_slots


_workers_seen = [0.0, 1]  # when the live workers were last counted, and how many


def bus_workers() -> int:
    """The live workers, counted at most once a second (item jobs are packed for them)."""
    if time.monotonic() - _workers_seen[0] > 1.0:
        live = bus.live_workers(settings.SWITCHYARD["WORKER_LOST_AFTER_SECONDS"])
        _workers_seen[:] = [time.monotonic(), max(1, len(live))]
    return int(_workers_seen[1])
