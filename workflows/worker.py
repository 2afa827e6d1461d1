"""The worker: RQ's SimpleWorker (no fork per job), a lean path for node jobs, a heartbeat.

Why not RQ's default forking worker: a fork per node costs about 30 ms and made RQ the
slowest peer measured here (103 node executions/s). What the fork gave, and how it is kept:
- a crash of the job cannot take the worker down -> a crashed or killed worker is restarted
  by its supervisor, and the reconciler fails the attempts it held (no heartbeat) so that
  they are retried on another worker;
- a timeout can kill a stuck job -> each attempt runs under SIGALRM (`execution.time_limit`);
- memory leaks die with the horse -> run workers with `--max-jobs` to recycle them.

Node jobs skip RQ's per-job bookkeeping (started/finished registries, execution records,
result keys: about 40 Redis commands and 3 ms per job, measured), because Postgres already
records every attempt: who claimed it, when, and how it ended. A node job is popped from
its queue, performed, and its key deleted. If the worker dies meanwhile, the reconciler sees
the claimed attempts without a heartbeat and retries them. Every other job (webhook
deliveries, say) goes through RQ's full path.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from typing import Any

import redis
from django.conf import settings
from django.db import close_old_connections
from rq import Queue, SimpleWorker
from rq.job import Job

from workflows import bus, jobs

log = logging.getLogger(__name__)

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
    atexit.register(bus.forget_worker, name)


def beat(name: str) -> None:
    bus.beat_worker(name, settings.SWITCHYARD["WORKER_LOST_AFTER_SECONDS"], {"pid": os.getpid()})


def beat_forever(name: str) -> None:
    interval = settings.SWITCHYARD["WORKER_HEARTBEAT_SECONDS"]
    stop = threading.Event()
    while not stop.wait(interval):
        try:
            beat(name)
        except (redis.ConnectionError, redis.TimeoutError):
            continue  # Redis away: the next beat may land


class NodeWorker(SimpleWorker):
    """Execute jobs in-process and announce liveness from the moment the worker starts."""

    def work(self, *args: Any, **kwargs: Any) -> bool:
        start_heartbeat(self.name)
        return super().work(*args, **kwargs)

    def execute_job(self, job: Job, queue: Queue) -> None:
        if job.func_name != jobs.TASK:
            super().execute_job(job, queue)
            return
        job.worker_name = self.name
        try:
            job.perform()
        except Exception:
            # Postgres or Redis failed under the task; the attempts it claimed are retried
            # by the reconciler (stuck or lost), the others were never claimed.
            log.exception("node job %s failed outside any handler", job.id)
            close_old_connections()  # a broken connection is replaced before the next job
        finally:
            with self.connection.pipeline() as pipe:
                pipe.delete(job.key)
                if len(self.queues) == 1:  # RQ moved the id to an intermediate list (LMOVE)
                    pipe.lrem(queue.intermediate_queue_key, 1, job.id)
                pipe.execute()
