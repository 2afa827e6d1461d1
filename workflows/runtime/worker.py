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

Under a backlog the worker takes batchable node jobs in bulk: the jobs at the head of its
first non-empty queue whose ids mark them batchable (short, CPU-only handlers) are taken,
with their hashes, in one Lua call and executed as one batch (one claim, one result
statement per flush). Idle, the call finds nothing and RQ's blocking pop takes the next
job. RQ's own worker heartbeat, which RQ writes around every job, is written by the
heartbeat thread once a second instead, and its state only when it changes.

Draining (the workers page): while `bus.drain_key(name)` exists the worker finishes what it
holds and takes no new job, alive and beating, in state `drained`, until the key goes. The
heartbeat thread reads the key with RQ's beat, once a second, into `drain_requested`: no
command on a job's path. An idle worker blocks in RQ's pop for at most DRAIN_POLL_SECONDS
(RQ's default is 405 s) and checks the flag at every wake-up, so a drain asked of an idle
worker holds within that time, and the job popped meanwhile is never dropped. Pausing all
workers is RQ's own suspension (`rq suspend` / `rq resume` work too).

Everything this relies on in RQ beyond its public API (the methods overridden here, the
queue and job layout the take reads, the intermediate list) is reached through, and
listed in, `rqcompat`.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Callable
from functools import cached_property
from typing import Any

import redis
from django.conf import settings
from django.db import close_old_connections
from redis.commands.core import Script
from rq import Queue, SimpleWorker
from rq.job import Job

from workflows.runtime import bus, execution, jobs, pgsession, rqcompat, tally

log = logging.getLogger(__name__)

_started: set[str] = set()
_lock = threading.Lock()


def start_heartbeat(name: str, also: Callable[[], None] | None = None) -> None:
    """Start (once per process) a thread that keeps `sy:worker:<name>` alive in Redis.

    `also` runs at every beat too (NodeWorker keeps RQ's own worker key alive with it).
    """
    with _lock:
        if name in _started:
            return
        _started.add(name)
    beat(name)
    thread = threading.Thread(target=beat_forever, args=(name, also), name="sy-heartbeat", daemon=True)
    thread.start()
    atexit.register(bus.forget_worker, name)


def beat(name: str) -> None:
    fields = {"pid": os.getpid(), **tally.snapshot()}
    bus.beat_worker(name, settings.SWITCHYARD["WORKER_LOST_AFTER_SECONDS"], fields)


def beat_forever(name: str, also: Callable[[], None] | None) -> None:
    interval = settings.SWITCHYARD["WORKER_HEARTBEAT_SECONDS"]
    stop = threading.Event()
    while not stop.wait(interval):
        try:
            beat(name)
            if also is not None:
                also()
        except (redis.ConnectionError, redis.TimeoutError):
            continue  # Redis away: the next beat may land


DRAIN_POLL_SECONDS = 2  # longest block in RQ's pop: how soon an idle worker sees a drain


class DrainRequested(Exception):
    """Raised inside RQ's pop loop, before it pops, to leave it while a drain is asked."""


TAKE_AT_MOST = 16  # jobs taken in one step, each of up to jobs.MAX_BATCH nodes


def job_given(job: Job) -> jobs.Given:
    """What a direct node job gives its attempts (jobs enqueued before direct jobs have none)."""
    return job.args[1] if len(job.args) > 1 else {}


class NodeWorker(SimpleWorker):
    """Execute jobs in-process and announce liveness from the moment the worker starts."""

    companions: tuple[Job, ...] = ()  # batchable jobs taken with the one RQ popped
    drain_requested = False  # written by the heartbeat thread (beat_rq)
    listening = False  # inside RQ's pop loop and nothing popped yet

    @property
    def dequeue_timeout(self) -> int:
        return min(super().dequeue_timeout, DRAIN_POLL_SECONDS)

    def work(self, *args: Any, **kwargs: Any) -> bool:
        pgsession.plan_generically()
        start_heartbeat(self.name, also=self.beat_rq)
        return super().work(*args, **kwargs)

    @cached_property
    def take_batchable(self) -> Script:
        return rqcompat.take_script(self.connection)

    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        """Leave RQ's plain heartbeat to the heartbeat thread (`beat_rq`).

        RQ beats before and after every pop and after every job, three round trips each
        time; after a pop they would stand between a node's job and its start.
        """
        if timeout is not None or pipeline is not None:
            super().heartbeat(timeout, pipeline)
        elif self.listening and self.drain_requested:
            raise DrainRequested  # at the top of RQ's pop loop: nothing was popped

    def reorder_queues(self, reference_queue: Queue) -> None:
        self.listening = False  # RQ popped a job: from here on it must run
        super().reorder_queues(reference_queue)

    def beat_rq(self) -> None:
        with self.connection.pipeline() as pipe:
            super().heartbeat(pipeline=pipe)
            pipe.exists(bus.drain_key(self.name))
            self.drain_requested = bool(pipe.execute()[-1])

    def wait_while_drained(self) -> None:
        if not self.drain_requested:
            return
        log.info("worker %s: drained, taking no job until the drain is lifted", self.name)
        self.set_state("drained")
        while self.drain_requested:
            time.sleep(0.2)

    def set_state(self, state: str, pipeline: Any = None) -> None:
        if pipeline is None and state == self.get_state():
            return
        super().set_state(state, pipeline)

    def dequeue_job_and_maintain_ttl(self, timeout: int | None, max_idle_time: int | None = None) -> Any:
        """Take a run of batchable jobs if they wait at the head of a queue; else pop as RQ does.

        The take never blocks: on an idle system it finds nothing and RQ's blocking pop
        waits for the next job, which then runs alone.
        """
        while True:
            self.wait_while_drained()
            taken = rqcompat.take_head(self, self.take_batchable, TAKE_AT_MOST, jobs.BATCHABLE_PREFIX)
            if taken is not None:
                break
            self.listening = True
            try:
                return super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
            except DrainRequested:
                continue
            finally:
                self.listening = False
        batch, queue = taken
        self.companions = tuple(batch[1:])
        return batch[0], queue

    def execute_job(self, job: Job, queue: Queue) -> None:
        if job.func_name != jobs.TASK:
            super().execute_job(job, queue)
            return
        batch, self.companions = [job, *self.companions], ()
        try:
            items = [item for j in batch for item in j.args[0]]
            execution.run_batch(items, self.name, {k: v for j in batch for k, v in job_given(j).items()})
        except Exception:
            # Postgres or Redis failed under the task; the attempts it claimed are retried
            # by the reconciler (stuck or lost), the others were never claimed.
            log.exception("node job %s failed outside any handler", job.id)
            close_old_connections()  # a broken connection is replaced before the next job
        finally:
            rqcompat.delete_taken(self, queue, batch)
