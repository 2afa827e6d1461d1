"""How a start reaches the workers, and notices that carry a run's state, so that the
scheduler decides an idle hop without a read.

Real PostgreSQL and Redis; the scheduler's and the worker's steps are called in this process.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.integration.conftest import node, publish
from workflows.runs import actions as runs
from workflows.runtime import advancing, bus, execution, jobs
from workflows.store.models import NodeRun, Run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("lone_starts")]

FORK = {
    "nodes": [node("a"), node("b"), node("c")],
    "edges": [{"source": "a", "target": "c"}, {"source": "b", "target": "c"}],
}


def start(definition: dict[str, Any] = FORK) -> Run:
    run, _ = runs.start_run(publish("fork", definition), {"user_id": "u-1"})
    return run


def statuses(run: Run) -> dict[str, str]:
    return dict(NodeRun.objects.filter(run=run).values_list("node_id", "status"))


def run_nodes(run: Run, *node_ids: str) -> list[execution.Claim]:
    """Claim these queued nodes as a worker does."""
    items = [
        (n.pk, n.attempt, run.version_id, n.node_id)
        for n in NodeRun.objects.filter(run=run, node_id__in=node_ids)
    ]
    claims, _ = execution.claim(items, "worker-t")
    return claims


def succeeded(claim: execution.Claim) -> execution.Result:
    now = timezone.now()
    return execution.Result(claim, execution.Outcome("succeeded", "{}"), now, now)


def notices() -> list[bus.Notice]:
    return bus.read_notices("scheduler-t", 100, 10)


def pending_rows(run: Run) -> list[list[Any]]:
    """The run's rows as a notice would have carried them before anything was claimed."""
    ids = NodeRun.objects.filter(run=run).values_list("id", "node_id")
    return [[i, run.pk, n, "pending", 0, run.version_id, 0, True] for i, n in ids]  # last: retryable


def test_a_started_runs_roots_go_to_the_workers_without_a_notice(redis_clean: None) -> None:
    run = start()

    roots = NodeRun.objects.filter(run=run, node_id__in=["a", "b"])
    assert statuses(run) == {"a": "queued", "b": "queued", "c": "pending"}
    assert {(n.attempt, n.tries) for n in roots} == {(1, 1)}
    [job_id] = {n.job_id for n in roots}  # two batchable roots share one direct job
    job = jobs.rq_queue("default").fetch_job(job_id)
    items, given = job.args
    assert sorted(item[3] for item in items) == ["a", "b"]
    assert given == {n.pk: (run.pk, {"user_id": "u-1"}, {}) for n in roots}
    assert notices() == []


class Statements:
    """What a start sends PostgreSQL, in order, and how many root jobs Redis held at each."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any, int]] = []

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        self.seen.append((sql, params, jobs.rq_queue("default").count))
        return execute(sql, params, many, context)

    def of_start(self) -> list[tuple[bool, bool, int]]:
        """(relaxed commit, a flush, root jobs waiting in Redis) for the start's and flush's statements."""
        return [
            (
                isinstance(params, dict) and params.get("relaxed") is True,
                "pg_logical_emit_message" in sql,
                count,
            )
            for sql, params, count in self.seen
            if "INSERT INTO" in sql and "workflows_run" in sql or "pg_logical_emit_message" in sql
        ]


def test_a_lone_start_sends_its_roots_before_it_waits_for_its_runs_flush(redis_clean: None) -> None:
    workflow = publish("fork", FORK)
    statements = Statements()

    with connection.execute_wrapper(statements):
        run, _ = runs.start_run(workflow, {"user_id": "u-1"})

    # The run is committed without waiting for the disk, its roots' job is in Redis, then a
    # synchronous commit waits for the WAL (the run's with it) before the start returns.
    assert statements.of_start() == [(True, False, 0), (False, True, 1)]
    assert statuses(run) == {"a": "queued", "b": "queued", "c": "pending"}


def test_a_start_in_its_callers_transaction_or_in_a_burst_commits_synchronously(
    settings, redis_clean: None
) -> None:
    workflow = publish("fork", FORK)
    statements = Statements()

    with connection.execute_wrapper(statements):
        with transaction.atomic():  # the caller's other changes ride on this commit: no early roots
            runs.start_run(workflow, {"user_id": "u-1"})
        assert jobs.rq_queue("default").count == 1 and notices() == []  # its roots' job, no notice
        settings.SWITCHYARD = {**settings.SWITCHYARD, "START_BURST_GAP_SECONDS": 3600.0}
        runs.start_run(workflow, {"user_id": "u-2"})
        runs.start_run(workflow, {"user_id": "u-3"})  # in a burst: its roots are the scheduler's

    assert [(relaxed, flush) for relaxed, flush, _ in statements.of_start()] == [(False, False)] * 3


def test_a_paused_workflows_run_keeps_its_roots_pending(redis_clean: None) -> None:
    workflow = publish("fork", FORK)
    runs.pause_workflow(workflow)

    run, _ = runs.start_run(workflow, {"user_id": "u-1"})

    assert run.status == "waiting"
    assert set(statuses(run).values()) == {"pending"}
    assert jobs.rq_queue("default").count == 0


def test_a_start_in_a_burst_leaves_its_roots_to_the_scheduler_with_the_runs_rows(
    settings, redis_clean: None
) -> None:
    settings.SWITCHYARD = {**settings.SWITCHYARD, "START_BURST_GAP_SECONDS": 3600.0}
    start()
    notices()  # the previous start may be long ago: this one may have come alone

    run = start()

    [notice] = notices()
    assert set(statuses(run).values()) == {"pending"}
    assert notice.run_ids == [run.pk]
    assert sorted(notice.rows) == sorted(pending_rows(run))
    run_ids, known = advancing.known_states([notice])
    advancing.advance_runs(run_ids, known=known)
    assert statuses(run) == {"a": "queued", "b": "queued", "c": "pending"}


def test_starts_come_alone_when_the_previous_one_is_older_than_the_gap(settings) -> None:
    pacing = runs.StartPacing()
    settings.SWITCHYARD = {**settings.SWITCHYARD, "START_BURST_GAP_SECONDS": 3600.0}
    assert [pacing.direct(), pacing.direct()] == [True, False]
    settings.SWITCHYARD = {**settings.SWITCHYARD, "START_BURST_GAP_SECONDS": 0.0}
    assert [pacing.direct(), pacing.direct()] == [True, True]


def test_a_result_carries_the_runs_state_only_once_nothing_else_of_it_is_in_flight(redis_clean: None) -> None:
    run = start()
    a, b = sorted(run_nodes(run, "a", "b"), key=lambda c: c.node_id)

    assert execution.finish([succeeded(a)], "worker-t") == ([run.pk], [])  # b still running: no rows
    run_ids, rows = execution.finish([succeeded(b)], "worker-t")

    assert run_ids == [run.pk]
    assert sorted((r[2], r[3]) for r in rows) == [("a", "succeeded"), ("b", "succeeded"), ("c", "pending")]


def test_the_result_that_completes_a_run_ends_it_with_nothing_to_notify(redis_clean: None) -> None:
    """The slots' store (execution.finish): the run's last node ends the run there."""
    run = start()
    execution.finish([succeeded(c) for c in run_nodes(run, "a", "b")], "worker-t")
    advancing.advance_runs([run.pk])
    [c] = run_nodes(run, "c")

    assert execution.finish([succeeded(c)], "worker-t") == ([], [])

    assert Run.objects.get(pk=run.pk).status == "succeeded"


def test_the_scheduler_decides_from_a_notices_rows_without_reading_the_run(redis_clean: None) -> None:
    run = start()
    _, rows = execution.finish([succeeded(c) for c in run_nodes(run, "a", "b")], "worker-t")

    with CaptureQueriesContext(connection) as queries:
        advancing.advance_runs([run.pk], known=rows)

    snapshot_reads = [q for q in queries.captured_queries if "n.node_id, n.status, n.tries" in q["sql"]]
    assert snapshot_reads == []
    assert statuses(run)["c"] == "queued"


def test_a_run_named_by_two_notices_of_one_batch_is_read_again() -> None:
    row = [1, 7, "a", "pending", 0, 3, 0]
    once = [bus.Notice("1-0", [7], [row])]
    twice = [bus.Notice("1-0", [7], [row]), bus.Notice("2-0", [7, 8])]

    assert advancing.known_states(once) == ({7}, [row])
    assert advancing.known_states(twice) == ({7, 8}, [])


def test_notices_taken_over_from_a_dead_scheduler_lose_their_rows(redis_clean: None) -> None:
    run = start()
    bus.notify(*execution.finish([succeeded(c) for c in run_nodes(run, "a", "b")], "worker-t"))
    assert notices()[0].rows  # read by scheduler-t, which dies before acknowledging

    [notice] = bus.claim_abandoned("scheduler-2", idle_ms=0)

    assert notice.run_ids == [run.pk] and notice.rows == []


def test_a_decision_from_old_rows_does_not_claim_a_node_that_moved_on(redis_clean: None) -> None:
    """The rows say `a` and `b` are pending; `b` was queued since, `a` has run and failed."""
    run = start()
    NodeRun.objects.filter(run=run, node_id="a").update(status="retrying", due_at=timezone.now())

    advancing.advance_runs([run.pk], known=pending_rows(run))

    assert statuses(run) == {"a": "retrying", "b": "queued", "c": "pending"}
    assert NodeRun.objects.get(run=run, node_id="b").attempt == 1  # claimed once, at the start


def test_a_handful_of_ready_batchable_nodes_share_a_job_and_a_crowd_is_spread() -> None:
    assert jobs.batch_size(2, workers=2) == jobs.SPREAD_FROM  # two roots: one job
    assert jobs.batch_size(200, workers=2) == jobs.MAX_BATCH
    assert jobs.batch_size(40, workers=2) == 10  # two jobs per worker
