"""The worker's dequeue against real Redis, and what the reconciler does when a worker dies after it."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
import redis
from django.utils import timezone
from rq import Queue
from rq.job import Job

from tests.integration.conftest import node, publish
from tests.integration.test_cross_host import Forward
from workflows.runs import actions as runs
from workflows.runtime import advancing, bus, jobs
from workflows.runtime.reconciler import Reconciler
from workflows.runtime.transitions import InputRow
from workflows.runtime.worker import TAKE_AT_MOST, NodeWorker
from workflows.store.models import NodeRun

pytestmark = pytest.mark.django_db


def enqueue(*job_ids: str, priority: int = 0) -> None:
    """Put node jobs on the default queue (its urgent lane above priority 0) in this order;
    their items name no real node."""
    packed = [jobs.PackedJob(job_id, "default", (n,)) for n, job_id in enumerate(job_ids, start=1)]
    claimed = {
        n: InputRow("claim", n, 1, 1, f"node-{n}", 1, None, priority) for n in range(1, len(job_ids) + 1)
    }
    jobs.enqueue(packed, claimed, {})


def take(worker: NodeWorker) -> list[str]:
    """Dequeue as the worker's loop does; return the ids of the jobs it will run as one batch."""
    job, _ = worker.dequeue_job_and_maintain_ttl(timeout=1)
    return [job.id, *(j.id for j in worker.companions)]


@pytest.fixture
def worker(redis_clean: None) -> NodeWorker:
    queue = jobs.rq_queue("default")
    return NodeWorker([queue], connection=queue.connection)


def test_batchable_jobs_at_the_head_of_the_queue_are_taken_together_up_to_another_kind(
    worker: NodeWorker,
) -> None:
    enqueue("syb-a", "syb-b", "sy-c", "syb-d")

    assert take(worker) == ["syb-a", "syb-b"]
    worker.companions = ()
    assert take(worker) == ["sy-c"]  # not batchable: RQ's own pop, alone
    assert take(worker) == ["syb-d"]
    assert jobs.rq_queue("default").count == 0


def test_a_backlog_is_taken_at_most_take_at_most_jobs_at_a_time(worker: NodeWorker) -> None:
    enqueue(*(f"syb-{n:02}" for n in range(TAKE_AT_MOST + 4)))

    assert take(worker) == [f"syb-{n:02}" for n in range(TAKE_AT_MOST)]
    assert jobs.rq_queue("default").count == 4


def test_executing_a_batch_deletes_every_job_it_held(worker: NodeWorker) -> None:
    enqueue("syb-a", "syb-b", "syb-c")
    job, queue = worker.dequeue_job_and_maintain_ttl(timeout=1)

    worker.execute_job(job, queue)  # the attempts name no node row: nothing is claimed

    assert worker.companions == ()
    assert not any(queue.connection.exists(Job.key_for(i)) for i in ("syb-a", "syb-b", "syb-c"))


@pytest.mark.django_db(transaction=True)
def test_a_job_taken_by_a_worker_that_died_before_claiming_is_enqueued_again(redis_clean: None) -> None:
    workflow = publish("taken", {"nodes": [node("only")], "edges": []})
    run, _ = runs.start_run(workflow, {})
    advancing.advance_runs([run.pk])
    queue = jobs.rq_queue("default")
    taken = queue.connection.lpop(queue.key)  # a worker took it, then was killed: the hash stays
    NodeRun.objects.filter(run=run).update(queued_at=timezone.now() - timedelta(minutes=5))

    assert Reconciler().requeue_lost_jobs(workers=1) == 1

    attempt = NodeRun.objects.get(run=run)
    assert attempt.status == "queued" and attempt.job_id != taken.decode()
    assert queue.job_ids == [attempt.job_id]
    assert Reconciler().requeue_lost_jobs(workers=1) == 0  # waiting in its queue: not lost


def test_rqs_worker_heartbeat_is_left_to_the_heartbeat_thread(worker: NodeWorker) -> None:
    """RQ's loop beats around every job (three round trips each); NodeWorker's beat thread does."""
    worker.register_birth()
    worker.connection.hset(worker.key, "last_heartbeat", "stale")
    worker.connection.expire(worker.key, 5)

    worker.heartbeat()  # what RQ's loop calls before and after each pop, and after each job
    assert worker.connection.hget(worker.key, "last_heartbeat") == b"stale"

    worker.beat_rq()  # each beat of the heartbeat thread
    assert worker.connection.hget(worker.key, "last_heartbeat") != b"stale"
    assert worker.connection.ttl(worker.key) > 5
    worker.register_death()


def test_an_urgent_job_is_taken_before_the_plain_queue_and_one_pop_in_eight_takes_plain_first(
    worker: NodeWorker,
) -> None:
    enqueue(*(f"sy-plain-{n}" for n in range(3)))
    enqueue(*(f"sy-urgent-{n}" for n in range(20)), priority=5)
    assert jobs.rq_queue("default-urgent").count == 20

    taken = [take(worker)[0] for _ in range(16)]

    assert taken[:7] == [f"sy-urgent-{n}" for n in range(7)]
    assert taken[7] == "sy-plain-0" and taken[15] == "sy-plain-1"  # aging: every eighth pop


@pytest.mark.django_db(transaction=True)
def test_the_reconciler_finds_an_urgent_job_waiting_in_its_lane(redis_clean: None) -> None:
    workflow = publish("urgent", {"nodes": [node("only")], "edges": []})
    run, _ = runs.start_run(workflow, {}, priority=9)
    advancing.advance_runs([run.pk])
    attempt = NodeRun.objects.get(run=run)
    assert attempt.status == "queued" and jobs.rq_queue("default-urgent").job_ids == [attempt.job_id]
    NodeRun.objects.filter(run=run).update(queued_at=timezone.now() - timedelta(minutes=5))

    assert Reconciler().requeue_lost_jobs(workers=1) == 0  # waiting in the urgent lane: not lost


def test_a_worker_waits_out_redis_at_the_top_of_its_loop_instead_of_quitting(redis_clean: None) -> None:
    """RQ's loop quits on a Redis error from check_for_suspension (rqcompat, assumption 9):
    a worker whose link dropped right after a job exited. Here its link (a relay to the
    real Redis) is cut for 6 s, longer than redis-py's own retries (about 4 s). The relay
    keeps its port meanwhile: one stopped and started again freed it, and another test's
    server once took it (the worker read an HTTP answer: InvalidResponse)."""
    relay = Forward("127.0.0.1", bus.client().connection_pool.connection_kwargs["port"])
    relay.start()
    connection = redis.Redis(host="127.0.0.1", port=relay.port, socket_timeout=2)
    worker = NodeWorker([Queue("default", connection=connection)], connection=connection)
    relay.cut = True
    connection.connection_pool.disconnect()  # the cut reaches the open connections too
    outcome: list[BaseException | None] = []

    def top_of_loop() -> None:
        try:
            worker.check_for_suspension(False)
            outcome.append(None)
        except BaseException as exc:  # the test reports whatever came out
            outcome.append(exc)

    started = time.monotonic()
    thread = threading.Thread(target=top_of_loop, daemon=True)
    thread.start()
    try:
        thread.join(6.0)
        assert not outcome, f"it gave up while Redis was away: {outcome}"
        relay.cut = False
        thread.join(15)
        assert outcome == [None] and time.monotonic() - started >= 6.0
    finally:
        relay.stop()
