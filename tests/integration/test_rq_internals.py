"""What Switchyard assumes of RQ beyond its public API (workflows/runtime/rqcompat.py), checked against real Redis.

Each test names the assumption it checks; after an RQ upgrade a failure says which one broke
and which RQ version broke it. The numbers are those of rqcompat's docstring.
"""

from __future__ import annotations

import inspect
import signal
from collections.abc import Iterator
from typing import Any

import pytest
import rq
from rq import Queue, SimpleWorker
from rq.exceptions import StopRequested
from rq.job import Job
from rq.worker import BaseWorker

from workflows.runtime import jobs, rqcompat
from workflows.runtime.worker import TAKE_AT_MOST, NodeWorker

pytestmark = pytest.mark.django_db


def broken(number: int, what: str) -> str:
    return (
        f"RQ {rq.__version__} breaks assumption {number} of workflows/runtime/rqcompat.py ({what}); "
        "adapt rqcompat (and NodeWorker) before upgrading"
    )


def push(queue: Queue, *job_ids: str) -> None:
    """Enqueue node jobs as jobs.enqueue does; they carry no attempt, so running one does nothing."""
    pipe = queue.connection.pipeline()
    for job_id in job_ids:
        rqcompat.push_job(pipe, queue, jobs.TASK, job_id, ([], {}), jobs.FAILED_JOB_TTL)
    pipe.execute()


@pytest.fixture
def queue(redis_clean: None) -> Queue:
    return jobs.rq_queue("default")


@pytest.fixture
def other(redis_clean: None) -> Queue:
    return jobs.rq_queue("agents")


# 1. Queue layout


def test_a_queue_is_a_list_of_job_ids_at_its_key_pushed_at_the_tail(queue: Queue) -> None:
    push(queue, "sy-a", "sy-b")

    assert queue.key == rqcompat.queue_key("default"), broken(1, "a queue's key is rq:queue:<name>")
    assert queue.connection.type(queue.key) == b"list", broken(1, "a queue is a Redis list")
    assert queue.connection.lrange(queue.key, 0, -1) == [b"sy-a", b"sy-b"], broken(
        1, "jobs are pushed at the tail"
    )


def test_rqs_pop_takes_the_head_of_the_list(queue: Queue) -> None:
    push(queue, "sy-a", "sy-b")

    popped = Queue.dequeue_any([queue], None, connection=queue.connection)

    assert popped is not None and popped[0].id == "sy-a", broken(1, "RQ pops from the head of the list")


def test_a_waiting_job_is_found_in_its_queue_and_a_popped_one_is_not(queue: Queue) -> None:
    push(queue, "sy-a", "sy-b")
    Queue.dequeue_any([queue], None, connection=queue.connection)

    assert rqcompat.are_waiting(queue.connection, [("sy-a", queue), ("sy-b", queue)]) == [False, True], (
        broken(1, "a popped id leaves the queue's list, a waiting one stays in it")
    )


# 2. Job layout


def test_a_job_is_a_hash_at_the_key_the_take_script_reads(queue: Queue) -> None:
    push(queue, "sy-a")

    key = Job.redis_job_namespace_prefix + "sy-a"
    assert Job.key_for("sy-a") == key, broken(2, "a job's key is Job.redis_job_namespace_prefix + id")
    assert queue.connection.type(key) == b"hash", broken(2, "a job is a Redis hash")


def test_a_job_restored_from_its_hash_equals_the_job_rq_fetches(queue: Queue) -> None:
    push(queue, "sy-a")
    fields = queue.connection.hgetall(Job.key_for("sy-a"))

    restored = Job("sy-a", connection=queue.connection)
    restored.restore(fields)
    fetched = Job.fetch("sy-a", connection=queue.connection)

    assert list(inspect.signature(Job.restore).parameters) == ["self", "raw_data"], broken(
        2, "Job.restore(raw_data) takes a job hash's fields"
    )
    seen = [
        (j.func_name, j.args, j.timeout, j.result_ttl, j.failure_ttl, j.origin) for j in (restored, fetched)
    ]
    assert seen[0] == seen[1], broken(2, "Job.restore rebuilds a job from its HGETALL mapping")


def test_the_take_script_takes_the_prefixed_jobs_at_the_head_with_their_hashes(queue: Queue) -> None:
    push(queue, "syb-a", "syb-b", "sy-c")
    worker = NodeWorker([queue], connection=queue.connection)

    taken = rqcompat.take_head(
        worker, rqcompat.take_script(queue.connection), TAKE_AT_MOST, jobs.BATCHABLE_PREFIX
    )

    assert taken is not None, broken(1, "the take finds the ids at the head of the queue's list")
    batch, source = taken
    assert [(j.id, j.func_name) for j in batch] == [("syb-a", jobs.TASK), ("syb-b", jobs.TASK)], broken(
        2, "the take finds each job's hash at Job.redis_job_namespace_prefix + id"
    )
    assert source.key == queue.key
    assert queue.connection.lrange(queue.key, 0, -1) == [b"sy-c"]


# 3. The worker's dequeue order


def test_rqs_pop_tries_the_queues_in_the_order_of_ordered_queues(queue: Queue, other: Queue) -> None:
    push(queue, "sy-a")
    push(other, "sy-b")
    worker = SimpleWorker([queue, other], connection=queue.connection)  # RQ's own, without urgent lanes

    assert [q.key for q in worker._ordered_queues] == [queue.key, other.key], broken(
        3, "BaseWorker._ordered_queues lists the worker's queues in dequeue order"
    )
    worker._ordered_queues = [other, queue]
    popped = SimpleWorker.dequeue_job_and_maintain_ttl(worker, None)

    assert popped is not None and popped[0].id == "sy-b", broken(
        3, "RQ's pop follows BaseWorker._ordered_queues"
    )


# 4. The intermediate list


@pytest.fixture
def one_queue_worker(queue: Queue) -> NodeWorker:
    version = queue.get_redis_server_version()
    assert version >= (6, 2, 0), f"these tests need Redis >= 6.2 (LMOVE); this one is {version}"
    worker = NodeWorker([queue], connection=queue.connection)
    # NodeWorker listens to each queue's urgent lane too (core/priorities.py); here it has
    # the one queue, as a worker started on a single queue without lanes would.
    worker.queues = worker._ordered_queues = [queue]
    return worker


def test_rqs_pop_from_one_queue_leaves_the_id_in_its_intermediate_list(
    queue: Queue, one_queue_worker: NodeWorker
) -> None:
    push(queue, "sy-a")

    SimpleWorker.dequeue_job_and_maintain_ttl(one_queue_worker, None)

    assert queue.intermediate_queue_key == f"{queue.key}:intermediate", broken(
        4, "the intermediate list's key"
    )
    assert queue.connection.lrange(queue.intermediate_queue_key, 0, -1) == [b"sy-a"], broken(
        4, "with one queue RQ pops with LMOVE into Queue.intermediate_queue_key"
    )


def test_rqs_pop_from_several_queues_leaves_no_intermediate_list(queue: Queue, other: Queue) -> None:
    push(queue, "sy-a")
    worker = NodeWorker([queue, other], connection=queue.connection)

    SimpleWorker.dequeue_job_and_maintain_ttl(worker, None)

    assert not queue.connection.exists(queue.intermediate_queue_key), broken(
        4, "with several queues RQ pops with LPOP, leaving no intermediate list to clean"
    )


def test_a_node_job_run_without_rqs_bookkeeping_leaves_neither_its_hash_nor_its_intermediate_id(
    queue: Queue, one_queue_worker: NodeWorker
) -> None:
    push(queue, "sy-a")
    job, source = SimpleWorker.dequeue_job_and_maintain_ttl(one_queue_worker, None)

    one_queue_worker.execute_job(job, source)

    assert not queue.connection.exists(Job.key_for("sy-a"), queue.intermediate_queue_key), broken(
        4, "RQ's prepare_job_execution is all that removes the intermediate id"
    )


# 5. The methods NodeWorker overrides, and how RQ's loop calls them


def comparable(method: Any) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(method).parameters.values()]


@pytest.mark.parametrize("name", [n for n in rqcompat.OVERRIDDEN if n != "work"])
def test_the_overridden_methods_have_rqs_signatures(name: str) -> None:
    assert name in vars(NodeWorker), f"NodeWorker no longer overrides {name}: update rqcompat.OVERRIDDEN"
    assert hasattr(SimpleWorker, name), broken(5, f"SimpleWorker.{name} exists")
    assert comparable(getattr(NodeWorker, name)) == comparable(getattr(SimpleWorker, name)), broken(
        5, f"SimpleWorker.{name}{inspect.signature(getattr(NodeWorker, name))}"
    )


def test_work_is_rqs_entry_point_and_nodeworker_passes_every_argument_on() -> None:
    assert "work" in vars(BaseWorker), broken(5, "BaseWorker.work is the work loop")
    assert comparable(NodeWorker.work) == [
        ("self", inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.empty),
        ("args", inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.empty),
        ("kwargs", inspect.Parameter.VAR_KEYWORD, inspect.Parameter.empty),
    ]


def test_set_state_writes_the_state_each_call_and_get_state_returns_the_last(
    queue: Queue, one_queue_worker: NodeWorker
) -> None:
    one_queue_worker.register_birth()
    for state in ("busy", "busy"):
        queue.connection.hdel(one_queue_worker.key, "state")
        SimpleWorker.set_state(one_queue_worker, state)
        assert queue.connection.hget(one_queue_worker.key, "state") == b"busy", broken(
            5, "BaseWorker.set_state writes the state on every call"
        )
    assert one_queue_worker.get_state() == "busy", broken(
        5, "BaseWorker.get_state returns the last state set"
    )
    one_queue_worker.register_death()


class RecordingWorker(NodeWorker):
    """NodeWorker recording how RQ's loop calls the methods it overrides."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[str, Any]] = []

    def dequeue_job_and_maintain_ttl(self, timeout: int | None, max_idle_time: int | None = None) -> Any:
        result = super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
        self.calls.append(("dequeue", None if result is None else result[0].id))
        return result

    def execute_job(self, job: Job, queue: Queue) -> None:
        self.calls.append(("execute", job.id))
        super().execute_job(job, queue)

    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        self.calls.append(("heartbeat", "plain" if timeout is None and pipeline is None else "prepared"))
        super().heartbeat(timeout, pipeline)


@pytest.fixture
def signals_kept() -> Iterator[None]:
    """RQ's loop installs its own SIGINT and SIGTERM handlers; give pytest its own back."""
    kept = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in kept.items():
        signal.signal(sig, handler)


def test_rqs_work_loop_calls_the_overridden_methods(queue: Queue, signals_kept: None) -> None:
    push(queue, "syb-a", "syb-b")
    queue.enqueue("os.getpid", job_id="plain", result_ttl=0)
    worker = RecordingWorker([queue], connection=queue.connection)

    SimpleWorker.work(worker, burst=True)  # RQ's loop itself, without NodeWorker's heartbeat thread

    dequeued = [value for name, value in worker.calls if name == "dequeue"]
    executed = [value for name, value in worker.calls if name == "execute"]
    beats = {value for name, value in worker.calls if name == "heartbeat"}
    assert dequeued == ["syb-a", "plain", None], broken(
        5, "the loop takes jobs with dequeue_job_and_maintain_ttl"
    )
    assert executed == ["syb-a", "plain"], broken(5, "the loop runs each job with execute_job(job, queue)")
    assert beats == {"plain", "prepared"}, broken(
        5, "the loop beats with heartbeat(), prepare_job_execution with heartbeat(timeout, pipeline)"
    )
    assert not queue.connection.exists(Job.key_for("syb-a"), Job.key_for("syb-b"), queue.key)


# 6. Pushing in one round trip


def test_pushing_jobs_on_a_pipeline_sends_nothing_before_it_executes(queue: Queue) -> None:
    pipe = queue.connection.pipeline()
    for job_id in ("sy-a", "sy-b"):
        rqcompat.push_job(pipe, queue, jobs.TASK, job_id, ([], {}), jobs.FAILED_JOB_TTL)

    assert not queue.connection.exists(queue.key, Job.key_for("sy-a")), broken(
        6, "Queue.enqueue_many(pipeline=pipe) only buffers its writes on pipe"
    )
    pipe.execute()
    assert queue.job_ids == ["sy-a", "sy-b"]


# 7. Stopping on a signal


def test_an_idle_worker_stops_at_once_and_stop_after_current_job_ends_the_loop_after_the_job(
    queue: Queue, signals_kept: None
) -> None:
    worker = RecordingWorker([queue], connection=queue.connection)
    worker._install_signal_handlers()
    assert signal.getsignal(signal.SIGTERM) == worker.request_stop, broken(
        7, "work installs request_stop for SIGTERM"
    )
    with pytest.raises(StopRequested):
        SimpleWorker.request_stop(worker, signal.SIGTERM, None)  # idle in RQ's eyes: stops at once
    signal.signal(signal.SIGTERM, worker.request_stop)

    push(queue, "syb-first", "syb-second")

    class StopsDuringFirstJob(RecordingWorker):
        def execute_job(self, job: Job, queue: Queue) -> None:
            super().execute_job(job, queue)
            rqcompat.stop_after_current_job(self)  # as NodeWorker.request_stop does mid-job

    stopping = StopsDuringFirstJob([queue], connection=queue.connection)
    SimpleWorker.work(stopping, burst=True)
    executed = [value for name, value in stopping.calls if name == "execute"]
    assert executed == ["syb-first"], broken(7, "the work loop ends after a job once _stop_requested is set")
    assert signal.getsignal(signal.SIGTERM) == stopping.request_force_stop


# 10. Slots: the stop leaves RQ's loop and returns to NodeWorker.work


def test_a_stop_raised_out_of_the_pop_ends_rqs_loop_and_work_returns_to_its_caller(
    queue: Queue, signals_kept: None
) -> None:
    class StopsWhileWaitingForASlot(RecordingWorker):
        def dequeue_job_and_maintain_ttl(self, timeout: int | None, max_idle_time: int | None = None) -> Any:
            self.calls.append(("dequeue", None))
            raise StopRequested  # what SIGTERM raises while NodeWorker waits for a free slot

    worker = StopsWhileWaitingForASlot([queue], connection=queue.connection)

    returned = SimpleWorker.work(worker)  # not burst: only the stop can end it

    assert returned is False, broken(10, "work returns to its caller after a StopRequested out of the pop")
    assert [name for name, _ in worker.calls].count("dequeue") == 1
    assert queue.connection.hget(worker.key, "death"), broken(
        10, "work tears the worker down before returning"
    )
