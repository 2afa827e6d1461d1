"""Everything that depends on RQ's private methods, key layout or Lua: the one place to check on an upgrade.

The rest of the tree uses RQ's public API (enqueue, fetch_job, Worker.all, get_current_job)
or calls the functions here; `NodeWorker` overrides RQ methods whose names and signatures
are listed below. tests/integration/test_rq_internals.py checks each assumption against the
installed RQ and a real Redis, and names the assumption that broke.

Assumptions about RQ 3.0, and why each is needed:

1. A queue is a Redis list of job ids at `Queue.key` (`rq:queue:<name>`), pushed at the
   tail and popped from the head. The batch take reads and trims its head in Lua, the
   reconciler asks LPOS whether a job still waits, and the dashboard reads LLEN by name
   without building Queue objects (`queue_key`).
2. A job is a Redis hash at `Job.key_for(id)` (`rq:job:<id>`), and `Job.restore` rebuilds a
   job from its HGETALL mapping. The batch take returns the hashes of up to TAKE_AT_MOST
   jobs with their ids, one round trip instead of one per job (`Job.fetch`).
3. `BaseWorker._ordered_queues` (private) lists the worker's queues in the order RQ's pop
   tries them. The batch take tries them in the same order, so queue priorities hold.
4. With one queue (and Redis >= 6.2) RQ pops with LMOVE into `Queue.intermediate_queue_key`
   (`<queue key>:intermediate`) and removes the id there in `prepare_job_execution`; with
   several it pops with LPOP. The lean path of node jobs skips `prepare_job_execution`, so
   it removes the id itself (`delete_taken`), else the intermediate list would grow until
   RQ's maintenance cleans it.
5. RQ's work loop calls, on the worker, `dequeue_job_and_maintain_ttl(timeout,
   max_idle_time)` -> (job, queue) or None, `execute_job(job, queue)`, `heartbeat(timeout,
   pipeline)` and `set_state(state, pipeline)`; NodeWorker overrides those four (and
   `work`) with the same signatures. Its plain beats are `heartbeat()` with no argument
   (before and after every pop, after every job: three round trips each time, which after
   a pop stood between a node's job and its start), while `prepare_job_execution` passes a
   timeout and a pipeline; `set_state` writes the state on every call and `get_state`
   returns the last one set. Skipping RQ's per-job bookkeeping (registries, execution
   records, result keys) saved about 40 Redis commands and 3 ms per job, measured.
6. `Queue.enqueue_many(..., pipeline=pipe)` of `Queue.prepare_data` entries only buffers
   commands on `pipe`: all the jobs of a claim reach Redis in one round trip at
   `pipe.execute()` (RQ's fixed cost per job is about 60 Redis commands and 4 ms of worker
   CPU, measured; paying it in one round trip per claim is what `jobs.enqueue` relies on).
7. For the drain (worker.py): `dequeue_job_and_maintain_ttl` loops, calling `heartbeat()`
   with no argument at the top of each turn, before it pops, and lets an exception from it
   out; it calls `reorder_queues(reference_queue=queue)` right after a pop that returned a
   job; it blocks at most `dequeue_timeout` seconds per turn (a property NodeWorker
   shortens). RQ's `suspend`/`resume` (rq.suspension) hold every worker at its loop's top.
8. SIGTERM and SIGINT call `request_stop(signum, frame)`, which RQ installs in `work`; when
   RQ thinks the worker idle it raises StopRequested from the signal handler, else it sets
   `_stop_requested` (private), which the work loop checks after each job, and installs
   `request_force_stop` for a second signal, which reads `_shutdown_requested_date`
   (private). NodeWorker's lean path never tells RQ it is busy, so its `request_stop` sets
   those two itself (`stop_after_current_job`).
9. The work loop calls `check_for_suspension(burst)` at the top of every turn and
   `run_maintenance_tasks()` now and then, and quits on any exception from them (a Redis
   TimeoutError: "Redis connection timeout, quitting"); only its own pop retries a Redis
   that is away. NodeWorker waits both out (`wait_out_redis`).
10. For slots (runtime/slots.py): a StopRequested raised out of `dequeue_job_and_maintain_ttl`
   (SIGTERM while NodeWorker waits for a free slot, or in RQ's own pop) ends RQ's work loop,
   which tears the worker down and returns from `work` rather than exiting: NodeWorker.work
   then waits for its slots' attempts, its heartbeat thread still beating, until they end or
   the drain deadline hands them back.
"""

from __future__ import annotations

import signal
from typing import Any

from redis import Redis
from redis.client import Pipeline
from redis.commands.core import Script
from rq import Queue
from rq.job import Job
from rq.utils import as_text, now
from rq.worker import BaseWorker

# Take, from the first non-empty queue, the jobs at its head whose ids start with ARGV[2]
# (at most ARGV[1]) and return {queue key, id, job hash, id, job hash, ...}, or {} when that
# head does not start so. Job hashes are at ARGV[3] .. id (assumptions 1 and 2).
TAKE_HEAD = """
for _, queue in ipairs(KEYS) do
    local ids = redis.call('LRANGE', queue, 0, tonumber(ARGV[1]) - 1)
    if #ids > 0 then
        local out = {queue}
        for _, id in ipairs(ids) do
            if string.sub(id, 1, #ARGV[2]) ~= ARGV[2] then break end
            out[#out + 1] = id
            out[#out + 1] = redis.call('HGETALL', ARGV[3] .. id)
        end
        if #out > 1 then redis.call('LTRIM', queue, (#out - 1) / 2, -1) end
        return out
    end
end
return {}
"""

# RQ's worker methods NodeWorker overrides (assumption 5).
OVERRIDDEN = (
    "work",
    "dequeue_job_and_maintain_ttl",
    "execute_job",
    "heartbeat",
    "set_state",
    "reorder_queues",
    "request_stop",
    "check_for_suspension",
    "run_maintenance_tasks",
)


def queue_key(name: str) -> str:
    """Return the Redis list in which the ids of queue `name`'s waiting jobs are (assumption 1)."""
    return f"{Queue.redis_queue_namespace_prefix}{name}"


def push_job(
    pipe: Pipeline, queue: Queue, func: str, job_id: str, args: tuple[Any, ...], failure_ttl: int
) -> None:
    """Add to `pipe` the commands that enqueue one job without timeout or result (assumption 6)."""
    data = Queue.prepare_data(func, args, timeout=-1, result_ttl=0, failure_ttl=failure_ttl, job_id=job_id)
    queue.enqueue_many([data], pipeline=pipe)


def are_waiting(connection: Redis, jobs: list[tuple[str, Queue]]) -> list[bool]:
    """Return, for each (job id, queue), whether the id is still in the queue's list (assumption 1)."""
    pipe = connection.pipeline(transaction=False)
    for job_id, queue in jobs:
        pipe.lpos(queue.key, job_id)
    return [position is not None for position in pipe.execute()]


def take_script(connection: Redis) -> Script:
    return connection.register_script(TAKE_HEAD)


def take_head(
    worker: BaseWorker, script: Script, at_most: int, prefix: str
) -> tuple[list[Job], Queue] | None:
    """Take the jobs whose ids start with `prefix` at the head of the worker's first non-empty queue.

    One Lua call, which never blocks; None when that head holds no such job (assumptions 1-3).
    """
    queues: list[Queue] = worker._ordered_queues
    reply = script(keys=[q.key for q in queues], args=[at_most, prefix, Job.redis_job_namespace_prefix])
    taken = []
    for job_id, fields in zip(reply[1::2], reply[2::2], strict=True):
        if fields:  # a job whose hash is gone was deleted meanwhile
            job = worker.job_class(
                as_text(job_id), connection=worker.connection, serializer=worker.serializer
            )
            job.restore(dict(zip(fields[::2], fields[1::2], strict=True)))
            taken.append(job)
    if not taken:
        return None
    return taken, next(q for q in queues if q.key == as_text(reply[0]))


def delete_taken(worker: BaseWorker, queue: Queue, batch: list[Job]) -> None:
    """Delete the hashes of jobs run without RQ's bookkeeping, and the id RQ's pop left aside (assumption 4).

    `batch[0]` is the job RQ's loop handed to `execute_job`; the others were taken with it.
    """
    with worker.connection.pipeline() as pipe:
        pipe.delete(*(j.key for j in batch))
        if len(worker.queues) == 1:  # RQ moved the first id to an intermediate list (LMOVE)
            pipe.lrem(queue.intermediate_queue_key, 1, batch[0].id)
        pipe.execute()


def stop_after_current_job(worker: BaseWorker) -> None:
    """Have RQ's work loop end after the current job; a second signal stops at once (assumption 8)."""
    worker._stop_requested = True
    worker._shutdown_requested_date = now()
    signal.signal(signal.SIGTERM, worker.request_force_stop)
    signal.signal(signal.SIGINT, worker.request_force_stop)
