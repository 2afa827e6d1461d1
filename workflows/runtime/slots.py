"""Slots: a worker runs the attempts of I/O-bound nodes as coroutines, many at once.

An `llm.chat` attempt streams for 5 to 60 s and an HTTP call waits on its server: held in a
worker process each (about 117 MB), a thousand in flight needed a thousand processes. Here
the worker's main thread stays RQ's (its pop, SIGALRM time limits for CPU-bound handlers,
signals), and the attempts of nodes that `kinds.is_io_bound` picks are handed to an asyncio
event loop running in a thread of the worker, up to SWITCHYARD_WORKER_SLOTS at once:

- claimed first, in the main thread (queued -> running, with the worker's name, in
  PostgreSQL: `execution.run_batch`), so a slot's attempt belongs to the worker's heartbeat
  and the reconciler fails it as lost when the process dies, as any other attempt;
- run on the loop under the node's timeout (`asyncio.timeout`: SIGALRM reaches only the main
  thread), by the handler's coroutine (`handlers.on_loop`);
- stored by the batched path (`execution.finish`, one statement per flush) every
  FLUSH_AFTER_SECONDS, and the slot is free only once its result is in PostgreSQL: a drain
  that waited for free slots lost nothing.

Django's ORM never runs on the loop's thread: every statement of the slots (a provider's
row, an LLM call's record, an agent's step, the flushes) runs on the slots' sync threads
(`offload`), SWITCHYARD_WORKER_SLOT_CONNECTIONS of them (8), a PostgreSQL connection each
whatever the slot count. One thread was the limit of a fleet of agents (bench/
agent_fleet_bench.py: 1,000 agents of 3 turns on 2 x 500 slots took 82 s for an ideal of 6;
the thread spent its time waiting on PostgreSQL's answers one statement after another, about
20 a turn), and one statement waiting on a lock held up every slot of the worker. An
attempt's own statements still run one after another (its coroutine awaits each), and the
flushes too (`flush_forever` awaits each). Redis writes of streamed text go out in one
pipeline per flush (offload.OUTBOX). An agent's tool calls
(plain handlers, which may block or use the ORM) run in asyncio's default thread pool
(`offload.to_thread`: min(32, CPUs + 4) threads, each with its own connection once it uses
the ORM); a workflow tool parks the attempt there as in the main thread (`kinds.Parked`).
Each slot's attempt captures its own log records (attemptlog.captured_in_task).

A map's items whose handler is I/O-bound take the same slots (runtime/items.py: `take`, run
by `attempt_on_loop`, stored by a flush of their own, `give_back` once stored).

Why a thread owns the loop rather than the main thread driving it: the main thread must
block in RQ's pop and run CPU-bound handlers under SIGALRM, and RQ's work loop is not a
coroutine. The thread's cost is the GIL: while a CPU-bound handler spins in the main thread,
the loop gets it at CPython's switch intervals (5 ms). Measured (bench/slots_bench.py
--probe, 2 cores at load 11 from other jobs): a 10 ms sleep on the loop woke 0.2-0.3 ms late
at p50 (4 ms p95) with the main thread idle, 18-26 ms late at p50 (43 ms p95) beside a main
thread spinning in Python; a 1 ms switch interval cut that to 12 ms, not worth changing the
whole process for. Both stay under the 100 ms that streamed text is coalesced to (streams.py),
and a worker whose queues carry long CPU-bound handlers is better given no slots at all.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from workflows import handlers
from workflows.core.graph import Node
from workflows.core.states import NodeStatus
from workflows.handlers import registry
from workflows.runtime import attemptlog, bus, execution, kinds, offload, tally
from workflows.runtime.execution import Claim, Outcome, Result
from workflows.runtime.outages import STORES_AWAY, Outage
from workflows.store import redaction
from workflows.store.errors import connection_lost
from workflows.store.payloads import check_json_size

log = logging.getLogger(__name__)

FLUSH_AFTER_SECONDS = execution.FLUSH_AFTER_SECONDS

current: Slots | None = None  # this process's slots, for the heartbeat (`snapshot`)


class Slots:
    """An event loop in a thread of the worker, and how many of its slots are taken."""

    def __init__(self, size: int, worker: str, connections: int = 1) -> None:
        self.size = size
        self.worker = worker
        self.used = 0  # taken by `submit` (main thread), given back once the result is stored
        self.changed = threading.Condition()
        self.results: list[Result] = []  # finished, not yet stored
        self.outbox: list[Any] = []  # Redis commands of streamed text, not yet sent
        self.sync_thread = ThreadPoolExecutor(max(1, connections), thread_name_prefix="sy-slots-sync")
        self.loop = asyncio.new_event_loop()
        self.outage = Outage(f"the slots of worker {worker}", log)

    def start(self) -> None:
        global current
        collect_less()
        offload.use(self.sync_thread, prepare=fresh_connection)
        registry.use_sync_runner(offload.run_sync)
        attemptlog.capture_in_tasks()
        threading.Thread(target=self.loop.run_forever, name="sy-slots", daemon=True).start()
        asyncio.run_coroutine_threadsafe(self.flush_forever(), self.loop)
        current = self

    # --- the main thread ---------------------------------------------------------------------

    def submit(self, claim: Claim, outputs: dict[str, Any]) -> None:
        """Run a claimed attempt in a slot; return at once (it is stored when it ends)."""
        node = execution.node_of(claim)
        ctx = execution.context_for(claim, node, outputs)
        started = kinds.began(node, ctx, timezone.now())  # an agent resumed: when its attempt began
        self.take()
        asyncio.run_coroutine_threadsafe(self.run(claim, node, ctx, started), self.loop)

    def take(self) -> None:
        """Take a slot for an attempt about to be handed to the loop (map items: runtime/items.py)."""
        with self.changed:
            self.used += 1

    def wait_free(self, timeout: float) -> bool:
        """Wait up to `timeout` for a free slot (the worker pops no job without one)."""
        with self.changed:
            return self.changed.wait_for(lambda: self.used < self.size, timeout)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every slot's attempt ended and is stored; False if `timeout` passed first."""
        with self.changed:
            return self.changed.wait_for(lambda: self.used == 0, timeout)

    @property
    def busy(self) -> bool:
        return self.used > 0

    # --- the loop ----------------------------------------------------------------------------

    async def run(self, claim: Claim, node: Node, ctx: handlers.NodeContext, started: datetime) -> None:
        offload.OUTBOX.set(self.outbox)
        with attemptlog.captured_in_task() as capture:
            outcome = await attempt_on_loop(node, ctx, f"node {claim.node_id!r}")
        outcome = execution.redacted(replace(outcome, log=capture.text()))
        if outcome.status == NodeStatus.WAITING:  # parked: nothing to store
            self.give_back(1)
            return
        self.results.append(Result(claim, outcome, started, timezone.now()))

    async def flush_forever(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_AFTER_SECONDS)
            taken = len(self.outbox)  # a tool's thread may append meanwhile: take what is there
            outbox = self.outbox[:taken]
            del self.outbox[:taken]  # in place: the slots' tasks hold this list (offload.OUTBOX)
            results, self.results = self.results, []
            if not outbox and not results:
                continue
            try:
                await offload.run_sync(store, outbox, results, self.worker)
            except STORES_AWAY as exc:
                # Keep the results for the next flush once the store is back (the slots stay
                # taken meanwhile, so a drain waits for them); the streamed text is dropped
                # (the next whole text mends it, livetext.WHOLE_EVERY_SECONDS).
                connections_cut()
                self.results[:0] = results
                await asyncio.sleep(self.outage.failed(exc))
                continue
            except Exception:
                # A result that cannot be stored for another reason: the attempts stay running
                # under a live worker, and the reconciler fails them once their timeout is past.
                log.exception("slots of worker %s: %d results not stored", self.worker, len(results))
                await offload.run_sync(close_old_connections)
            self.outage.ok()
            self.give_back(len(results))

    def give_back(self, count: int) -> None:
        if count:
            with self.changed:
                self.used -= count
                self.changed.notify_all()


def store(outbox: list[Any], results: list[Result], worker: str) -> None:
    """On the sync thread: send the streamed text, then store the results and notify."""
    if outbox:
        pipe = bus.client().pipeline(transaction=False)
        for add_commands in outbox:
            add_commands(pipe)
        pipe.execute()
    if results:
        for result in results:
            tally.add(result.outcome.status == NodeStatus.SUCCEEDED)
        bus.notify(*execution.finish(results, worker))


# --- connections cut by a PostgreSQL restart -----------------------------------------------
#
# A restart cuts every connection of the process at once, but each thread learns it only
# when its own next statement fails: the sync thread's, and that of every thread of the pool
# an agent's tool calls ran in (`make chaos` saw agent nodes end failed, each retry dying on
# another thread's dead connection). So the first cut any thread sees is counted here, and
# each thread replaces its connection before its next offloaded call (`fresh_connection`,
# offload's `prepare`) when it was opened before the latest cut.

_cuts = 0  # connection cuts seen by this process
_seen = threading.local()  # per thread: the count of cuts when its connection was last checked


def connections_cut() -> None:
    """Record that PostgreSQL cut this process's connections (every thread's is suspect)."""
    global _cuts
    _cuts += 1


def fresh_connection() -> None:
    """Replace this thread's connection if a cut or an error left it unusable; keep a sound one.

    Not close_old_connections: with CONN_MAX_AGE 0 it would reconnect at every call, where
    the slots share one connection for hundreds of attempts a second.
    """
    cut = getattr(_seen, "cuts", _cuts) != _cuts
    if cut or (connection.errors_occurred and not connection.is_usable()):
        connection.close()
    connection.errors_occurred = False
    _seen.cuts = _cuts


def answer() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


async def wait_for_postgres(what: str) -> None:
    """Return once PostgreSQL answers again (on the sync thread, with a fresh connection)."""
    outage = Outage(what, log)
    while True:
        try:
            await offload.run_sync(answer)
        except STORES_AWAY as exc:
            connections_cut()
            await asyncio.sleep(outage.failed(exc))
        else:
            outage.ok()
            return


async def attempt_on_loop(node: Node, ctx: handlers.NodeContext, what: str) -> Outcome:
    """`execution.run_attempt` for a slot: the node's timeout by asyncio, not SIGALRM; never raises.

    An attempt whose PostgreSQL connection was cut under it (a restart: `connection_lost`)
    is the platform's failure, not the node's: it waits for PostgreSQL and runs again within
    the same attempt and timeout. What it recorded before the cut is not done again (an
    agent's steps, a call's idempotency key); a call whose answer was not recorded is made
    again, as after a worker's kill.
    """
    try:
        async with asyncio.timeout(node.timeout_seconds):
            while True:
                try:
                    output = await kinds.execute_on_loop(node, ctx)
                    break
                except STORES_AWAY as exc:
                    if not connection_lost(exc):
                        raise
                    connections_cut()
                    await wait_for_postgres(what)
            output = redaction.redact_value(output)
        limit = settings.SWITCHYARD["MAX_OUTPUT_BYTES"]
        return Outcome(NodeStatus.SUCCEEDED, check_json_size(output, limit, f"The output of {what}"))
    except kinds.Parked:
        return Outcome(NodeStatus.WAITING)
    except TimeoutError:
        return execution.timed_out(node, what)
    except Exception as exc:  # a slot's boundary, as run_attempt is the main thread's
        return execution.failed(exc)


# Python's cyclic garbage collector, for a worker with slots: hundreds of coroutines allocate
# millions of short-lived objects, and with the default thresholds (700, 10, 10) the
# collections scanned the whole heap (Django, the handlers' modules, the slots' state) again
# and again: in bench/agent_fleet_bench.py (3,000 runs, 2026-11-27) a worker made ~970 young,
# ~88 middle and 8 full collections, and gc callbacks timed them at a large share of its
# time. Here: what the process holds once started is frozen (never scanned again; it lives as
# long as the process anyway), and young collections wait for 10,000 new objects: 34, 3 and
# no full collections in the same bench, and the workers' CPU 15 % lower.
GC_THRESHOLDS = (10_000, 10, 10)


def collect_less() -> None:
    """Freeze what the worker holds now and collect less often (see GC_THRESHOLDS)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def start(worker: str) -> Slots | None:
    """Start this worker's slots (none when SWITCHYARD_WORKER_SLOTS is 0)."""
    size = int(settings.SWITCHYARD["WORKER_SLOTS"])
    if size <= 0:
        return None
    slots = Slots(size, worker, int(settings.SWITCHYARD["WORKER_SLOT_CONNECTIONS"]))
    slots.start()
    return slots


def snapshot() -> dict[str, int]:
    """Slots used and free, for the heartbeat (nothing when this process has none)."""
    if current is None:
        return {}
    used = current.used
    return {"slots": current.size, "slots_used": used, "slots_free": max(0, current.size - used)}
