"""The worker: RQ's SimpleWorker (no fork per job), a lean path for node jobs, a heartbeat.

Why not RQ's default forking worker: a fork per node costs about 30 ms and made RQ the
slowest peer measured here (103 node executions/s). What the fork gave, and how it is kept:
- a crash of the job cannot take the worker down -> a crashed or killed worker is restarted
  by its supervisor, and the reconciler fails the attempts it held (no heartbeat) so that
  they are retried on another worker;
- a timeout can kill a stuck job -> each attempt runs under SIGALRM (`limits.time_limit`);
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

SIGTERM stops it for good: the worker takes no new job, lets the current one finish for up to
WORKER_DRAIN_SECONDS, and if it is still running then hands its attempts back (failed as
lost, so the engine retries them elsewhere at once, per their retry policy, rather than after
the heartbeat timeout) and exits. RQ alone would not know: the lean path never tells it the
worker is busy, and RQ raises StopRequested into whatever is running when it thinks it idle
(a handler then failed with "StopRequested" and the worker carried on; `make run` had to
SIGKILL it).

Slots (runtime/slots.py): attempts of I/O-bound nodes (LLM calls, HTTP requests) are claimed
in the main thread, then run as coroutines on the worker's event loop, up to
SWITCHYARD_WORKER_SLOTS at once, while the main thread goes back to popping; it pops
nothing while every slot is taken (`wait_for_a_slot`). SIGTERM drains them too: the worker
takes no new job, its slots finish up to WORKER_DRAIN_SECONDS, and what is still running
then is handed back as above. A map's items of I/O-bound handlers take the same slots
(runtime/items.py), and are drained and handed back alike.

Everything this relies on in RQ beyond its public API (the methods overridden here, the
queue and job layout the take reads, the intermediate list) is reached through, and
listed in, `rqcompat`.
"""

from __future__ import annotations

import atexit
import contextlib
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

from workflows.core import priorities
from workflows.runtime import (
    bus,
    execution,
    items as map_items,
    jobs,
    mapping,
    pgsession,
    reconciler,
    rqcompat,
    slots,
    tally,
)
from workflows.runtime.outages import MAX_DELAY_SECONDS, STORES_AWAY, Outage

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
    fields = {"pid": os.getpid(), **tally.snapshot(), **slots.snapshot()}
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
    """Execute jobs in-process and announce liveness from the moment the worker starts.

    It listens to the urgent lane of each of its queues before the queues themselves
    (core/priorities.py), except on one pop in every AGING_EVERY, which takes the plain
    queues first: a stream of urgent jobs never starves the plain ones.
    """

    # RQ's pop waits for a Redis that is away with a doubling delay up to this: 5 s, as every
    # other loop here (outages.Outage), not RQ's 60 s, which left a worker idle for up to a
    # minute after Redis was back (seen: "retrying in 32 seconds" after a cut link returned).
    max_connection_wait_time = MAX_DELAY_SECONDS

    companions: tuple[Job, ...] = ()  # batchable jobs taken with the one RQ popped
    pops = 0
    drain_requested = False  # written by the heartbeat thread (beat_rq)
    listening = False  # inside RQ's pop loop and nothing popped yet
    in_node_job = False  # RQ's own state says idle during a node job (the lean path)
    slots: slots.Slots | None = None  # I/O-bound attempts in flight (started by `work`)
    stopping = False  # SIGTERM came: the drain deadline is running

    def __init__(self, queues: Any, *args: Any, **kwargs: Any) -> None:
        given = [queues] if isinstance(queues, str | Queue) else list(queues)
        names = [q.name if isinstance(q, Queue) else q for q in given]
        super().__init__([jobs.rq_queue(name) for name in priorities.lanes(names)], *args, **kwargs)
        self.urgent_first = list(self._ordered_queues)
        plain = [q for q in self.urgent_first if not q.name.endswith(priorities.URGENT_SUFFIX)]
        self.plain_first = plain + [q for q in self.urgent_first if q not in plain]

    @property
    def dequeue_timeout(self) -> int:
        return min(super().dequeue_timeout, DRAIN_POLL_SECONDS)

    def request_stop(self, signum: int, frame: Any) -> None:
        """SIGTERM or Ctrl-C: finish the current node job and the slots' attempts, or hand
        them back at the deadline."""
        if self.is_holding_attempts and not self.stopping:
            self.stopping = True
            deadline = settings.SWITCHYARD["WORKER_DRAIN_SECONDS"]
            log.warning(
                "worker %s: stopping; finishing its current job and %d slots (handed back after %g s)",
                self.name,
                self.slots.used if self.slots else 0,
                deadline,
            )
            timer = threading.Timer(deadline, self.hand_back_and_exit, args=(deadline,))
            timer.daemon = True  # a worker that finished in time exits now, not at the deadline
            timer.start()
        if not self.in_node_job:
            # Idle in the pop (RQ raises StopRequested out of it), or an RQ job that RQ knows
            # about; `work` then waits for the slots.
            super().request_stop(signum, frame)  # type: ignore[no-untyped-call]  # RQ's Worker.request_stop has no annotations
            return
        rqcompat.stop_after_current_job(self)

    @property
    def is_holding_attempts(self) -> bool:
        return self.in_node_job or (self.slots is not None and self.slots.busy)

    def hand_back_and_exit(self, deadline: float) -> None:
        """The drain deadline passed mid-job: fail this worker's running attempts as lost, exit."""
        if not self.is_holding_attempts:
            return  # it finished in time and RQ's loop is stopping
        handed = reconciler.hand_back(
            self.name, f"Worker {self.name} was stopped; not done within the {deadline:g} s drain."
        )
        log.warning("worker %s: handed back %d attempts; exiting", self.name, handed)
        with contextlib.suppress(*STORES_AWAY):
            bus.forget_worker(self.name)
        os._exit(0)  # the handler is still running: no cleanup may wait for it

    def check_for_suspension(self, burst: bool) -> None:
        self.wait_out_redis(super().check_for_suspension, burst)

    def run_maintenance_tasks(self) -> None:
        self.wait_out_redis(super().run_maintenance_tasks)

    def wait_out_redis(self, step: Callable[..., None], *args: Any) -> None:
        """Take one of the steps at the top of RQ's loop, waiting out a Redis that is away.

        RQ's loop quits on a Redis error there (rqcompat, assumption 9): a worker whose link
        to Redis dropped right after a job exited instead of carrying on.
        """
        outage = Outage(f"worker {self.name}", log)
        while True:
            try:
                step(*args)
            except STORES_AWAY as exc:
                time.sleep(outage.failed(exc))
                continue
            outage.ok()
            return

    def work(self, *args: Any, **kwargs: Any) -> bool:
        pgsession.plan_generically()
        self.slots = slots.start(self.name)
        start_heartbeat(self.name, also=self.beat_rq)
        try:
            return super().work(*args, **kwargs)
        finally:
            if self.slots is not None and self.slots.busy:
                log.info("worker %s: waiting for %d slots to finish", self.name, self.slots.used)
                self.slots.wait_idle()  # the drain's deadline (hand_back_and_exit) bounds it

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
            if not self.wait_for_a_slot():
                continue
            self.pops += 1
            self._ordered_queues = (
                self.plain_first if self.pops % priorities.AGING_EVERY == 0 else self.urgent_first
            )
            try:
                taken = self.take_in_bulk()
            except STORES_AWAY:
                taken = None  # Redis away: RQ's pop below waits for it with its own backoff
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

    def take_in_bulk(self) -> tuple[list[Job], Queue] | None:
        """Take the batchable jobs at the head of the first non-empty queue; else, with free
        slots, the jobs of I/O-bound nodes there, up to one a free slot (claimed then in one
        statement by `execution.run_batch`, handed to the slots). None: RQ's pop takes one.

        One job a pop held a fleet of agents to about 5 jobs a second per worker under load
        (bench/agent_fleet_bench.py: each pop and claim waited for the GIL behind the slots'
        threads), where 1,000 slots free up 500 a second.
        """
        taken = rqcompat.take_head(self, self.take_batchable, TAKE_AT_MOST, jobs.BATCHABLE_PREFIX)
        free = self.slots.size - self.slots.used if self.slots is not None else 0
        if taken is None and free > 1:
            taken = rqcompat.take_head(self, self.take_batchable, min(free, TAKE_AT_MOST), jobs.SLOTS_PREFIX)
        return taken

    def wait_for_a_slot(self) -> bool:
        """Wait (up to DRAIN_POLL_SECONDS) until a slot is free: a job popped meanwhile might be
        I/O-bound, and the queue keeps it for another worker rather than this one holding it."""
        if self.slots is None:
            return True
        return self.slots.wait_free(DRAIN_POLL_SECONDS)  # a SIGTERM meanwhile: StopRequested

    def execute_job(self, job: Job, queue: Queue) -> None:
        if job.func_name == mapping.TASK:  # map items: the same lean path as node jobs
            self.companions = ()
            self.in_node_job = True
            try:
                map_items.run_items(job.args[0], self.name, self.slots)
            except Exception:
                log.exception("map item job %s failed outside any handler", job.id)
                close_old_connections()
            finally:
                self.in_node_job = False
                rqcompat.delete_taken(self, queue, [job])
            return
        if job.func_name != jobs.TASK:
            super().execute_job(job, queue)
            return
        batch, self.companions = [job, *self.companions], ()
        self.in_node_job = True
        try:
            items = [item for j in batch for item in j.args[0]]
            given = {k: v for j in batch for k, v in job_given(j).items()}
            execution.run_batch(items, self.name, given, self.slots)
        except Exception:
            # Postgres or Redis failed under the task; the attempts it claimed are retried
            # by the reconciler (stuck or lost), the others were never claimed.
            log.exception("node job %s failed outside any handler", job.id)
            close_old_connections()  # a broken connection is replaced before the next job
        finally:
            self.in_node_job = False
            try:
                rqcompat.delete_taken(self, queue, batch)
            except STORES_AWAY as exc:
                # Redis went away under the job: its keys stay behind, and a job run again
                # finds its attempts already claimed or finished (claims are conditional).
                log.warning("node job %s: Redis away, its keys stay (%s)", job.id, exc)
