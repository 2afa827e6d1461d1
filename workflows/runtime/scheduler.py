"""The scheduler: consume notices, decide with the engine, enqueue what is ready.

`Scheduler.tick()` does one step and returns how much it did; `manage.py runscheduler`
loops it. Any number of schedulers can run against the same Redis and Postgres: notices
are shared through a consumer group, every claim is a conditional update, and one of them
at a time (a Redis lock) runs the reconciler.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
from typing import Any

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.db import close_old_connections

from workflows.runtime import advancing, bus, duties, mapping, pgsession
from workflows.runtime.outages import STORES_AWAY, Outage
from workflows.runtime.reconciler import Reconciler
from workflows.store.graphs import active_versions, load_graph
from workflows.store.models import WorkflowVersion

log = logging.getLogger(__name__)

BATCH = 500
HOUSEKEEPING_SECONDS = 0.1
RECONCILE_SECONDS = 1.0
ABANDONED_AFTER_MS = 5000


class VersionWatcher(threading.Thread):
    """Keep every active version's graph loaded, following announcements on pub/sub.

    After every (re)connection it reloads all active versions from Postgres, so a scheduler
    that was cut off from Redis while versions were published catches up.
    """

    def __init__(self) -> None:
        super().__init__(name="sy-versions", daemon=True)
        self.active: dict[int, int] = {}
        self.stop = threading.Event()
        self.connected = threading.Event()

    def run(self) -> None:
        outage = Outage("version watcher", log)
        while not self.stop.is_set():
            try:
                self.listen(outage)
            except STORES_AWAY as exc:  # Redis or Postgres (the reload) away: never die of it
                self.connected.clear()
                self.stop.wait(outage.failed(exc))
            finally:
                close_old_connections()

    def listen(self, outage: Outage) -> None:
        pubsub = bus.client().pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]  # redis-py leaves Redis.pubsub unannotated
        pubsub.subscribe(bus.scoped(bus.VERSIONS_CHANNEL))
        self.reload_all()  # after subscribing: nothing announced in between is missed
        self.connected.set()
        outage.ok()
        while not self.stop.is_set():
            message = pubsub.get_message(timeout=1.0)
            if message is not None:
                self.load(json.loads(message["data"]))

    def reload_all(self) -> None:
        active = active_versions()
        for version_id in active.values():
            load_graph(version_id)
        self.active = active
        log.info("loaded %d active versions", len(active))

    def load(self, announcement: dict[str, Any]) -> None:
        try:
            load_graph(announcement["version"])
        except WorkflowVersion.DoesNotExist:  # deleted since, or announced by another store
            log.warning("announced version %s is not in the store; ignored", announcement["version"])
            return
        self.active = {**self.active, announcement["workflow"]: announcement["version"]}
        log.info("workflow %s now runs version %s", announcement["workflow"], announcement["version"])


class Scheduler:
    def __init__(self, name: str | None = None, block_ms: int = 50) -> None:
        self.name = name or f"{socket.gethostname()}.{os.getpid()}"
        self.block_ms = block_ms
        self.workers = 1
        self.reconciler = Reconciler()
        self.watcher = VersionWatcher()
        self.next_housekeeping = 0.0
        self.next_reconcile = 0.0
        self.next_duty: dict[str, float] = {}

    def start(self) -> None:
        pgsession.plan_generically()
        bus.ensure_group()
        self.watcher.start()

    def stop(self) -> None:
        self.watcher.stop.set()
        with contextlib.suppress(*STORES_AWAY):  # its heartbeat expires by itself then
            bus.client().delete(bus.scheduler_key(self.name))

    def tick(self) -> int:
        """Handle one batch of notices, then housekeeping when due; return decisions made."""
        notices = bus.read_notices(self.name, BATCH, self.block_ms)
        done = self.handle(notices)
        now = time.monotonic()
        if now >= self.next_housekeeping:
            self.next_housekeeping = now + HOUSEKEEPING_SECONDS
            done += advancing.enqueue_due(self.workers)
            done += mapping.advance_due(self.workers)
        for duty in duties.periodic():
            if now >= self.next_duty.get(duty.name, 0.0):
                self.next_duty[duty.name] = now + duty.every_seconds
                done += duty.run()
        if now >= self.next_reconcile:
            self.next_reconcile = now + RECONCILE_SECONDS
            done += self.reconcile()
        return done

    def handle(self, notices: list[bus.Notice]) -> int:
        if not notices:
            return 0
        try:
            done = self.advance(notices)
        except ObjectDoesNotExist:  # one of them names what the store no longer holds
            done = sum(self.advance_alone(notice) for notice in notices)
        bus.ack([notice.msg_id for notice in notices])
        return done

    def advance(self, notices: list[bus.Notice]) -> int:
        run_ids, known = advancing.known_states(notices)
        return advancing.advance_runs(run_ids, self.workers, known)

    def advance_alone(self, notice: bus.Notice) -> int:
        """Advance one notice's runs; skip it (logged) if it names a version or a run deleted
        since it was written, rather than exit: the others of its batch still count. Deciding
        again what the batch had applied is at worst a no-op (every change is conditional)."""
        try:
            return self.advance([notice])
        except ObjectDoesNotExist as exc:
            log.warning(
                "notice %s (runs %s) names what the store no longer holds (%s); skipped",
                notice.msg_id,
                notice.run_ids,
                exc,
            )
            return 0

    def reconcile(self) -> int:
        """Beat, count workers, adopt abandoned notices, and reconcile if no one else is."""
        self.workers = max(1, len(bus.live_workers(settings.SWITCHYARD["WORKER_LOST_AFTER_SECONDS"])))
        bus.heartbeat(
            bus.scheduler_key(self.name),
            RECONCILE_SECONDS * 5,
            {"pid": os.getpid(), "active_versions": self.watcher.active, "workers": self.workers},
        )
        done = self.handle(bus.claim_abandoned(self.name, ABANDONED_AFTER_MS))
        if bus.client().set(bus.RECONCILER_LOCK, self.name, nx=True, px=int(RECONCILE_SECONDS * 3000)):
            repaired = self.reconciler.run(self.workers)
            for duty in duties.exclusive():  # outbound webhook deliveries: one sender at a time
                done += duty.run()
            bus.client().delete(bus.RECONCILER_LOCK)
            if any(repaired.values()):
                log.warning("reconciler repaired %s", repaired)
            done += sum(repaired.values())
        return done
