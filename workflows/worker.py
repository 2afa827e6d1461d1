"""The worker: RQ's SimpleWorker (no fork per job) plus a liveness heartbeat.

Why not RQ's default forking worker: a fork per node costs about 30 ms and made RQ the
slowest peer measured here (103 node executions/s). What the fork gave, and how it is kept:
- a crash of the job cannot take the worker down -> a crashed or killed worker is restarted
  by its supervisor, and the reconciler fails the attempts it held (no heartbeat) so that
  they are retried on another worker;
- a timeout can kill a stuck job -> each attempt runs under SIGALRM (`execution.time_limit`);
- memory leaks die with the horse -> run workers with `--max-jobs` to recycle them.
"""

from __future__ import annotations

import atexit
import json
import os
import threading
from typing import Any

from django.conf import settings
from rq import SimpleWorker

from workflows import bus

_started: set[str] = set()
_lock = threading.Lock()


def start_heartbeat(name: str) -> None:
    """Start (once per process) a thread that keeps `sy:worker:<name>` alive in Redis."""
    with _lock:
        if name in _started:
            return
        _started.add(name)
    beat(name)
    thread = threading.Thread(target=beat_forever, args=(name,), name="sy-heartbeat", daemon=True)
    thread.start()
    atexit.register(lambda: bus.client().delete(bus.worker_key(name)))


def beat(name: str) -> None:
    bus.heartbeat(
        bus.worker_key(name), settings.SWITCHYARD["WORKER_LOST_AFTER_SECONDS"], {"pid": os.getpid()}
    )


def beat_forever(name: str) -> None:
    interval = settings.SWITCHYARD["WORKER_HEARTBEAT_SECONDS"]
    stop = threading.Event()
    while not stop.wait(interval):
        try:
            beat(name)
        except Exception:  # noqa: BLE001 - Redis away: keep trying, the next beat may land
            continue


class NodeWorker(SimpleWorker):
    """Execute jobs in-process and announce liveness from the moment the worker starts."""

    def work(self, *args: Any, **kwargs: Any) -> bool:
        start_heartbeat(self.name)
        return super().work(*args, **kwargs)


def describe(name: str) -> dict[str, Any]:
    raw = bus.client().get(bus.worker_key(name))
    return json.loads(raw) if raw else {}
