"""SIGTERM to a worker (real processes): it finishes its job or hands it back, and takes no new one."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.conftest import node, publish
from tests.integration.runtime import Runtime, wait_for
from workflows.runs import actions as runs
from workflows.store.models import NodeRun, RunEvent


@pytest.fixture
def rt(transactional_db: Any, redis_clean: None) -> Iterator[Runtime]:
    runtime = Runtime(SWITCHYARD_WORKER_DRAIN_SECONDS="2")
    yield runtime
    runtime.stop()


def running_on(run_id: int, worker: str, attempt: int = 1) -> bool:
    return NodeRun.objects.filter(run_id=run_id, status="running", worker=worker, attempt=attempt).exists()


def test_a_worker_stopped_mid_job_finishes_it_and_takes_no_new_job(rt: Runtime) -> None:
    workflow = publish(
        "drain-short", {"nodes": [node("wait", "core.delay", config={"seconds": 1})], "edges": []}
    )
    rt.worker("w1")
    rt.scheduler("s1")
    rt.wait_ready()
    run, _ = runs.start_run(workflow, {})
    wait_for(lambda: running_on(run.pk, "w1"), what="the delay running on w1")

    rt.procs["w1"].send_signal(signal.SIGTERM)
    later, _ = runs.start_run(workflow, {})  # queued while w1 drains: it must not take it

    assert rt.procs["w1"].wait(10) == 0
    done = NodeRun.objects.get(run=run, node_id="wait")
    assert (done.status, done.attempt, done.error) == ("succeeded", 1, "")  # not "StopRequested"
    assert NodeRun.objects.get(run=later, node_id="wait").worker == ""  # never taken by w1


def test_a_worker_stopped_mid_job_hands_it_back_at_the_drain_deadline(rt: Runtime) -> None:
    slow = node("wait", "core.delay", config={"seconds": 60}, timeout_seconds=120, retry={"max_attempts": 2})
    workflow = publish("drain-long", {"nodes": [slow], "edges": []})
    rt.worker("w1")
    rt.scheduler("s1")
    rt.wait_ready()
    run, _ = runs.start_run(workflow, {})
    wait_for(lambda: running_on(run.pk, "w1"), what="the delay running on w1")
    rt.worker("w2")

    rt.procs["w1"].send_signal(signal.SIGTERM)

    assert rt.procs["w1"].wait(15) == 0
    lost = RunEvent.objects.get(run=run, kind="node.lost", node_id="wait")
    assert lost.attempt == 1 and lost.data["worker"] == "w1"
    # Retried on the other worker at once, not after the heartbeat timeout.
    wait_for(lambda: running_on(run.pk, "w2", attempt=2), timeout=30, what="attempt 2 running on w2")
