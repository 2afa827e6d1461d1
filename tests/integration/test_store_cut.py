"""A worker whose PostgreSQL connection is cut while a handler runs stores the result anyway.

`make chaos` (CI, 2026-11-27) found a run stuck: PostgreSQL was killed while a worker stored
a delay node's result, the store raised, the worker dropped the result, and the attempt stayed
`running` on a live, heart-beating worker until the reconciler's overdue check (the node's
timeout and 30 s more). The worker now stores it again once PostgreSQL answers
(execution.when_up); a map's items too. The same holds between the start of an attempt and
its handler: nothing reads PostgreSQL there (a node's), or the read waits it out (map items').
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest
from django.db import connection

from tests.integration.conftest import node, publish, wait_finished
from tests.integration.runtime import Runtime, wait_for
from workflows.runs import actions as runs
from workflows.runtime import execution, items as map_items, jobs, mapping, transitions
from workflows.store.graphs import workflow_of
from workflows.store.models import MapItem, NodeRun, RunEvent

CUT_EVERY_OTHER_CONNECTION = (
    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
)


def test_a_result_whose_store_lost_its_connection_is_stored_once_postgresql_answers(
    runtime: Runtime, transactional_db: Any
) -> None:
    # A timeout of 120 s: the reconciler's overdue check would take 150 s, far past the wait below.
    slow = node("slow", "core.delay", config={"seconds": 2}, timeout_seconds=120)
    workflow = publish("cut-store", {"nodes": [slow, node("after", "core.echo")], "edges": [
        {"source": "slow", "target": "after"}]})  # fmt: skip
    run, _ = runs.start_run(workflow, {})
    wait_for(
        lambda: NodeRun.objects.filter(run=run, node_id="slow", status="running").exists(), 30, "slow running"
    )
    with connection.cursor() as cur:  # what a PostgreSQL restart does to the worker's connection
        cur.execute(CUT_EVERY_OTHER_CONNECTION)
    began = time.monotonic()
    assert wait_finished(run, 40).status == "succeeded"
    assert time.monotonic() - began < 40
    slow_row = NodeRun.objects.get(run=run, node_id="slow")
    assert (slow_row.attempt, slow_row.tries) == (1, 1)  # stored by the attempt that ran, not retried
    assert not RunEvent.objects.filter(run=run, kind="node.lost").exists()


def test_map_items_whose_store_lost_its_connection_are_stored_once_postgresql_answers(
    runtime: Runtime, transactional_db: Any
) -> None:
    each = node("each", "core.delay", config={"seconds": 2}, map="input.items", timeout_seconds=120)
    run, _ = runs.start_run(publish("cut-items", {"nodes": [each]}), {"items": [1, 2]})
    wait_for(lambda: MapItem.objects.filter(run=run, status="running").count() == 2, 30, "both items running")
    with connection.cursor() as cur:
        cur.execute(CUT_EVERY_OTHER_CONNECTION)
    began = time.monotonic()
    assert wait_finished(run, 40).status == "succeeded"
    assert time.monotonic() - began < 40
    assert set(MapItem.objects.filter(run=run).values_list("status", "attempt")) == {("succeeded", 1)}


def cut_after(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Make `transitions.<name>` cut this process's PostgreSQL connection right after it
    returns, as a restart would."""
    real = getattr(transitions, name)

    def then_cut(*args: Any) -> Any:
        done = real(*args)
        pid = connection.connection.info.backend_pid
        with psycopg.connect(**connection.get_connection_params(), autocommit=True) as other:
            other.execute("SELECT pg_terminate_backend(%s)", [pid])
        return done

    monkeypatch.setattr(transitions, name, then_cut)


def test_attempts_cut_off_right_after_their_claim_run_once_postgresql_answers(
    transactional_db: Any, redis_clean: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From the claim (running, on this worker) to the handler, nothing reads PostgreSQL: the
    version's workflow (the context's) is read before the claim. This process runs the run's
    root job as a worker would, its connection cut right after the claim."""
    monkeypatch.setattr(runs.pacing, "last", -float("inf"))  # a start alone enqueues its roots itself
    run, _ = runs.start_run(
        publish("cut-claim", {"nodes": [node("slow", "core.delay", config={"seconds": 0})]}), {}
    )
    queue = jobs.rq_queue("default")
    job = queue.fetch_job(queue.get_job_ids()[0])
    assert job is not None and job.func_name == jobs.TASK
    queue.remove(job.id)  # taken, as a worker's pop takes it
    workflow_of.cache_clear()  # as in a worker that has not run this version yet
    cut_after(monkeypatch, "start_attempts")
    assert execution.run_batch(job.args[0], "test-worker") == 1
    slow = NodeRun.objects.get(run=run)
    assert (slow.status, slow.attempt, slow.tries) == ("succeeded", 1, 1)


def test_map_items_whose_inputs_read_lost_its_connection_run_once_postgresql_answers(
    transactional_db: Any, redis_clean: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window a CI rehearsal found: items started (running, on this worker), then the read
    of their inputs cut. The real scheduler expands the map and queues its item job; this
    process runs the job as a worker would, its connection cut right after the start."""
    rt = Runtime()
    rt.scheduler("scheduler-1")
    rt.wait_ready()
    try:
        each = node("each", "core.echo", map="input.items")
        run, _ = runs.start_run(publish("cut-inputs", {"nodes": [each]}), {"items": [1, 2]})
        queue = jobs.rq_queue("default")
        job_id = wait_for(lambda: next(iter(queue.get_job_ids()), None), 30, "the map's item job")
        job = queue.fetch_job(job_id)
        assert job is not None and job.func_name == mapping.TASK
        queue.remove(job_id)  # taken, as a worker's pop takes it

        cut_after(monkeypatch, "start_items")
        assert map_items.run_items(job.args[0], "test-worker") == 2
        assert wait_finished(run, 30).status == "succeeded"
        assert set(MapItem.objects.filter(run=run).values_list("status", "attempt")) == {("succeeded", 1)}
    finally:
        rt.stop()
