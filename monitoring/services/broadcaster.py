"""The one broadcaster: derive the dashboard from Postgres and Redis, push coalesced snapshots.

A tick (every MONITOR["INTERVAL_SECONDS"], a few per second) reads what happened since the
last one — new run events by primary key, in-flight nodes through partial indexes, queue
depths and heartbeats — folds it into rolling windows, and sends at most one message per
topic to its Channels group, whatever the load: a node event never becomes a websocket
message of its own. Every message carries the broadcaster's epoch and a sequence number per
topic, so a client that misses one (channel layer full, reconnect) notices and re-syncs.

Snapshot topics (`overview`, `workers`, `workflow:<id>`) are sent when they change, and at
least every KEEPALIVE_SECONDS so that a lost last message is noticed. Change topics (`runs`,
`deadletters`) list what changed; run pages and lists fetch what they show themselves.
Streamed LLM text (`llm:` topics) does not wait for a tick: `stream_texts` follows the
workers' feed with a blocking XREAD and sends each piece as it comes (livetext.py; why, with
figures, in its docstring). Running two broadcasters is harmless (clients see two epochs and re-sync more often) but
pointless; `make run` starts one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import deque
from datetime import UTC, datetime
from typing import Any

import redis.asyncio as aioredis
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from django.template.loader import render_to_string

from monitoring.services import charts, counters, events, livetext, snapshots, sources, tracing
from monitoring.services.stats import Windows
from workflows.runtime import bus
from workflows.runtime.outages import STORES_AWAY, Outage

log = logging.getLogger(__name__)

BACKFILL_EVENTS = 50_000  # events read at start-up to fill the per-node windows
KEEPALIVE_SECONDS = 5.0
SLOW_SECONDS = 1.0  # workers, schedulers and RQ's registries are read at most this often
MOVED_LOOKBACK_SECONDS = 2.0
MAX_CHANGED_RUNS = 500
MAX_GAPS_SHOWN = 100
RUN_EVENT_STATUS = {"run.succeeded": "succeeded", "run.failed": "failed", "run.cancelled": "cancelled"}
LETTER_KINDS = {"node.dead", "node.replayed", "deadletter.discarded"}
# Events after which someone's inbox may differ (a cancelled run closes its waits).
APPROVAL_KINDS = {
    "approval.requested",
    "approval.decided",
    "approval.escalated",
    "node.expired",
    "run.cancelled",
}

FRAGMENTS = {
    "overview": {
        "overview-workflows": "monitoring/fragments/overview_workflows.html",
        "overview-system": "monitoring/fragments/overview_system.html",
    },
    "workers": {"workers-tables": "monitoring/fragments/workers_tables.html"},
}


def render_fragments(topic: str, data: dict[str, Any]) -> dict[str, str]:
    """Render a topic's HTML fragments with the templates the pages include."""
    return {
        target: render_to_string(name, {"snap": data}) for target, name in FRAGMENTS.get(topic, {}).items()
    }


class Broadcaster:
    def __init__(self) -> None:
        self.epoch = int(time.time() * 1000)
        self.seq: dict[str, int] = {}
        self.sent: dict[str, tuple[str, float]] = {}  # topic -> (data as JSON, when)
        self.windows = Windows()
        self.reader: sources.EventReader | None = None
        self.moved: set[tuple[int, str, int]] = set()
        self.history: deque[tuple[float, dict[str, int]]] = deque(maxlen=64)
        self.slow_at = 0.0
        self.sampled_at = 0.0
        self.slow: dict[str, Any] = {}
        self.exporter = tracing.exporter()
        self.texts = livetext.LiveTexts()
        # Set by start() when it could not resume after its saved cursor: events before it
        # were never read, so the first tick tells every page that any list may have moved.
        self.unread_before_start = False

    def start(self) -> None:
        """Resume after the saved cursor (or start now), and fill the windows first.

        Run outcomes of the last hour come from Postgres, up to the moment the event reader
        takes over; per-node windows from the BACKFILL_EVENTS events before that point.
        """
        now = time.time()
        last = sources.last_event_id()
        saved, saved_at = counters.saved_cursor(), counters.last_tick()
        if saved is not None and saved_at is not None and 0 <= last - saved <= BACKFILL_EVENTS:
            resume, start, upto = True, saved, saved_at
        else:
            resume, start, upto = False, last, now
        for workflow_id, status, minute, n in sources.rows(sources.RECENT_RUNS_SQL, [upto]):
            ok = status == "succeeded"
            self.windows.seed_runs(workflow_id, minute, n if ok else 0, 0 if ok else n)
        self.backfill(max(0, start - BACKFILL_EVENTS), start)
        self.reader = sources.EventReader(start)
        self.unread_before_start = not resume
        self.windows.prune(now)

    def backfill(self, after: int, upto: int) -> None:
        reader = sources.EventReader(after)
        while reader.high < upto:
            batch, more = reader.read()
            attempts = [e for e in batch if e.kind == "node.attempt" and e.id <= upto]
            self.fold(attempts, counters.Totals(), {})
            if not more:
                break

    def tick(self) -> tuple[list[events.Message], bool]:
        """Read, fold and build this tick's messages; return them and whether events wait."""
        assert self.reader is not None, "call start() first"
        now = time.time()
        batch, more = self.reader.read()
        totals = counters.Totals()
        changed: dict[str, str | None] = {}
        letters_changed = self.fold(batch, totals, changed)
        self.track_moves(changed)
        self.windows.prune(now)
        self.exporter.export(batch)
        everything, self.unread_before_start = self.unread_before_start, False
        messages = self.build(now, changed, letters_changed, everything)
        if everything or any(e.kind in APPROVAL_KINDS for e in batch):
            messages.append(self.stamp("approvals", {"at": now}, now))
        self.persist(messages, totals, now)
        return messages, more

    def fold(
        self, batch: list[sources.Event], totals: counters.Totals, changed: dict[str, str | None]
    ) -> bool:
        """Add events to the windows and totals; note changed runs; say if letters changed."""
        letters_changed = False
        for e in batch:
            if e.kind == "node.attempt":
                ok = e.status == "succeeded"
                self.windows.add_attempt(e.workflow_id, e.node_id, e.at, ok, e.duration_ms)
                totals.node_attempt(e.workflow_id, e.node_id, e.status or "unknown", e.duration_ms)
            elif e.kind in RUN_EVENT_STATUS:
                self.windows.add_run(e.workflow_id, e.at, RUN_EVENT_STATUS[e.kind])
                totals.run_finished(e.workflow_id, RUN_EVENT_STATUS[e.kind])
            letters_changed |= e.kind in LETTER_KINDS
            key = str(e.run_id)  # string keys: the change list travels as JSON and msgpack
            changed[key] = RUN_EVENT_STATUS.get(e.kind, changed.get(key))
        return letters_changed

    def track_moves(self, changed: dict[str, str | None]) -> None:
        """Add runs whose nodes were queued or started lately (no run event marks those)."""
        moved = {(i, status, attempt): run_id for i, run_id, status, attempt in sources.rows(
            sources.MOVED_SQL, [MOVED_LOOKBACK_SECONDS]
        )}  # fmt: skip
        for key, run_id in moved.items():
            if key not in self.moved:
                changed.setdefault(str(run_id), None)
        self.moved = set(moved)

    def build(
        self, now: float, changed: dict[str, str | None], letters_changed: bool, everything: bool = False
    ) -> list[events.Message]:
        """The tick's messages; `everything`: say that any run and letter may have changed."""
        in_flight = snapshots.group_in_flight(sources.rows(sources.IN_FLIGHT_SQL))
        workflows = sources.workflows()
        self.refresh_slow(now)
        state = {
            **sources.queues_and_roster(),
            "schedulers": self.slow["schedulers"],
            "notices": self.slow["notices"],
            "waits": self.slow["waits"],
        }
        self.history.append((now, state["depths"]))
        self.sample_backlog(now, state["depths"], in_flight, workflows)
        letters = dict(sources.rows(sources.OPEN_LETTERS_SQL))
        runs = sources.rows(sources.RUNS_IN_FLIGHT_SQL)
        overview = snapshots.build_overview(
            now, workflows, self.windows, in_flight, runs, letters, state, list(self.history)
        )
        if self.reader is not None:
            # Which run events this snapshot has folded in: all up to `cursor`, and those up to
            # `high` but the `gaps` (ids of transactions not committed yet). bench/ reads these.
            overview["cursor"] = self.reader.cursor
            overview["high"] = self.reader.high
            overview["gaps"] = sorted(self.reader.gaps)[:MAX_GAPS_SHOWN]
        topics: dict[str, dict[str, Any]] = {"overview": overview}
        if self.slow.get("fresh"):
            topics["workers"] = snapshots.build_workers(
                now, state, self.slow["rq"], self.slow["running"], overview["queues"]
            )
        for wf in workflows:
            if wf["active_version_id"]:
                topics[f"workflow:{wf['id']}"] = snapshots.build_workflow(
                    wf["id"], self.windows, in_flight, now
                )
        stamped = [self.message(topic, data, now) for topic, data in topics.items()]
        messages = [m for m in stamped if m is not None]
        if changed or everything:
            overflow = everything or len(changed) > MAX_CHANGED_RUNS
            runs_data = {"at": now, "overflow": overflow, "runs": {} if overflow else changed}
            messages.append(self.stamp("runs", runs_data, now))
        if letters_changed or everything:
            messages.append(self.stamp("deadletters", {"at": now, "open": sum(letters.values())}, now))
        return messages

    def sample_backlog(
        self,
        now: float,
        depths: dict[str, int],
        in_flight: dict[int, Any],
        workflows: list[sources.WorkflowRow],
    ) -> None:
        """Write the backlog chart's sample once every BACKLOG_SAMPLE_SECONDS."""
        if now - self.sampled_at < settings.MONITOR["BACKLOG_SAMPLE_SECONDS"]:
            return
        self.sampled_at = now
        queued = {
            wf["id"]: sum(node.get("queued", 0) for node in in_flight.get(wf["id"], {}).values())
            for wf in workflows
            if wf["active_version_id"]
        }
        charts.sample_backlog(depths, queued, datetime.fromtimestamp(now, UTC))

    def refresh_slow(self, now: float) -> None:
        """Read schedulers, RQ's worker registry and running attempts at most once a second."""
        if self.slow and now - self.slow_at < SLOW_SECONDS:
            self.slow["fresh"] = False
            return
        self.slow_at = now
        self.slow = {
            "fresh": True,
            "schedulers": sources.schedulers(),
            "notices": sources.notice_backlog(),
            "rq": sources.rq_workers(),
            "running": sources.rows(sources.RUNNING_ATTEMPTS_SQL),
            "waits": dict(sources.rows(sources.OPEN_WAITS_SQL)),
        }

    def message(self, topic: str, data: dict[str, Any], now: float) -> events.Message | None:
        """Stamp a snapshot topic's message, unless it did not change and no keepalive is due."""
        # The cursor counts: new events are news even when every count came out the same.
        key = json.dumps({k: v for k, v in data.items() if k != "at"}, sort_keys=True)
        previous = self.sent.get(topic)
        if previous is not None and previous[0] == key and now - previous[1] < KEEPALIVE_SECONDS:
            return None
        self.sent[topic] = (key, now)
        return self.stamp(topic, data, now)

    def stamp(self, topic: str, data: dict[str, Any], now: float) -> events.Message:
        self.seq[topic] = self.seq.get(topic, 0) + 1
        message: events.Message = {"topic": topic, "epoch": self.epoch, "seq": self.seq[topic], "data": data}
        html = render_fragments(topic, data)
        if html:
            message["html"] = html
        return message

    def persist(self, messages: list[events.Message], totals: counters.Totals, now: float) -> None:
        pipe = bus.client().pipeline(transaction=False)
        for message in messages:
            if message["topic"] not in ("runs", "deadletters", "approvals") and not message[
                "topic"
            ].startswith("llm:"):
                counters.save_latest(pipe, message["topic"], message)
        totals.write(pipe)
        counters.save_cursor(pipe, self.reader.cursor if self.reader else 0, now)
        pipe.execute()


async def run_forever(broadcaster: Broadcaster, stop: asyncio.Event) -> None:
    """Tick every interval, and send streamed text as it comes, until `stop` is set."""
    texts = asyncio.create_task(stream_texts(broadcaster, stop))
    try:
        await tick_forever(broadcaster, stop)
    finally:
        texts.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await texts


async def stream_texts(broadcaster: Broadcaster, stop: asyncio.Event) -> None:
    """Send the pages each piece of streamed LLM text as soon as the feed has it.

    The fast path, apart from the tick and the channel layer (livefeed.py says why the
    latter): waiting for the tick (every INTERVAL_SECONDS, 0.25 s, plus its Postgres reads)
    adds 125 ms to a token on average and 250 ms at worst, and no setting of it reaches
    100 ms at p95 without ticking the whole dashboard that often.
    The tick's own work (and its Postgres reads) never delays a piece here: this loop runs
    on the event loop while the tick runs on the sync thread. Figures: docs/benchmarks.md.
    """
    client = aioredis.Redis.from_url(settings.REDIS_URL, decode_responses=True, health_check_interval=30)
    outage = Outage("broadcaster's texts", log)
    started = False
    try:
        while not stop.is_set():
            try:
                if not started:
                    await broadcaster.texts.start(client)
                    started = True
                found = await broadcaster.texts.read(client)
                now = time.time()
                await events.publish_live(client, [broadcaster.stamp(t, data, now) for t, data in found])
                outage.ok()
            except (OSError, *STORES_AWAY) as exc:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=outage.failed(exc))
    finally:
        await client.aclose()


async def tick_forever(broadcaster: Broadcaster, stop: asyncio.Event) -> None:
    """Tick every interval until `stop` is set; a store that is away is waited for."""
    interval = settings.MONITOR["INTERVAL_SECONDS"]
    outage = Outage("broadcaster", log)
    ready = False
    while not stop.is_set():
        started = time.monotonic()
        waited = 0.0
        try:
            if not ready:  # its stores may be away when it starts, too
                await sync_to_async(broadcaster.start, thread_sensitive=True)()
                ready = True
            messages, more = await sync_to_async(broadcaster.tick, thread_sensitive=True)()
            await events.publish(messages)
            outage.ok()
        except (OSError, *STORES_AWAY) as exc:
            await sync_to_async(close_old_connections, thread_sensitive=True)()
            more, waited = False, outage.failed(exc)
        if more:
            continue  # catching up: read the next batch at once
        pause = max(waited, interval - (time.monotonic() - started))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=pause)
