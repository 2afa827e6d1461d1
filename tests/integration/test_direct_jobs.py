"""Direct jobs: batchable nodes' jobs carry what their attempts are given, and run unclaimed.

Real PostgreSQL and Redis; the scheduler's and the worker's steps are called in this process.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from rq.job import Job

from tests.integration.conftest import node, publish
from workflows.runs import actions as runs
from workflows.runtime import advancing, bus, execution, jobs, reconciler, transitions
from workflows.store.models import NodeRun, Run, RunEvent

pytestmark = pytest.mark.django_db(transaction=True)

FORK = {
    "nodes": [
        node("a", "core.echo"),
        node("b", "core.echo"),
        node("c", "core.echo"),
        node("slow", "core.delay", config={"seconds": 0.1}),
    ],
    "edges": [{"source": "a", "target": "c"}, {"source": "b", "target": "c"}],
}


@pytest.fixture
def run(redis_clean: None) -> Run:
    run, _ = runs.start_run(publish("direct", FORK), {"user_id": "u-1"})
    return run


def waiting_jobs() -> list[Job]:
    queue = jobs.rq_queue("default")
    return [queue.fetch_job(job_id) for job_id in queue.job_ids]


def take_direct_job() -> tuple[list[jobs.Item], jobs.Given]:
    [job] = [job for job in waiting_jobs() if job.args[1]]
    jobs.rq_queue("default").remove(job.id)
    return job.args[0], job.args[1]


def node_row(run: Run, node_id: str) -> NodeRun:
    return NodeRun.objects.get(run=run, node_id=node_id)


def test_ready_batchable_nodes_share_a_direct_job_with_the_run_input_and_others_get_their_own(
    run: Run,
) -> None:
    advancing.advance_runs([run.pk])

    by_nodes = {tuple(item[3] for item in job.args[0]): job.args[1] for job in waiting_jobs()}
    assert set(by_nodes) == {("a", "b"), ("slow",)}
    assert by_nodes[("slow",)] == {}  # not batchable: the worker claims it
    given = by_nodes[("a", "b")]
    assert {
        noderun_id: (run_id, execution.from_json(text)) for noderun_id, (run_id, text, _) in given.items()
    } == {node_row(run, n).pk: (run.pk, {"user_id": "u-1"}) for n in ("a", "b")}


def test_a_direct_job_runs_unclaimed_and_the_fan_in_it_completes_runs_here_given_both_outputs(
    run: Run,
) -> None:
    advancing.advance_runs([run.pk])
    items, given = take_direct_job()

    with CaptureQueriesContext(connection) as queries:
        assert execution.run_batch(items, "worker-t", given) == 3  # a and b, then c: both succeeded

    assert not [q for q in queries.captured_queries if "SET status = 'running'" in q["sql"]]  # no claim
    assert {node_row(run, n).worker for n in ("a", "b", "c")} == {"worker-t"}
    assert node_row(run, "c").job_id.startswith("syf-")  # queued by the statement that stored a and b
    assert node_row(run, "c").output["upstream"] == {n: node_row(run, n).output for n in ("a", "b")}
    assert not [job for job in waiting_jobs() if job.args[1]]  # no direct job for c


def test_a_fan_in_whose_other_predecessor_was_stored_before_runs_here_given_its_output(run: Run) -> None:
    advancing.advance_runs([run.pk])
    items, given = take_direct_job()
    first, second = items

    assert execution.run_batch([first], "worker-t", given) == 1  # a: b not yet succeeded
    assert node_row(run, "c").status == "pending"
    assert execution.run_batch([second], "worker-u", given) == 2  # b, then c

    c = node_row(run, "c")
    assert c.status == "succeeded" and c.worker == "worker-u"
    assert c.output["upstream"] == {n: node_row(run, n).output for n in ("a", "b")}


def test_two_predecessors_stored_at_the_same_moment_leave_the_fan_in_to_the_scheduler_once(
    run: Run,
) -> None:
    """Each statement reads the rows committed when it began: b's, still uncommitted, does
    not see a's; a's does not see b's. Neither queues c; the scheduler does, once."""
    advancing.advance_runs([run.pk])
    items, given = take_direct_job()
    claims = {c.node_id: c for c in execution.given_claims(items, given, {})}
    results = {n: execution.Result(c, *execution.execute(c, {})) for n, c in claims.items()}
    b_stored, a_stored = threading.Event(), threading.Event()
    seen: list[transitions.Finished] = []

    def store_b() -> None:
        try:
            with transaction.atomic():
                seen.append(
                    execution.finish_and_follow([results["b"]], "worker-b", execution.follows([results["b"]]))
                )
                b_stored.set()
                a_stored.wait(10)  # commit only after a's statement ran
        finally:
            connection.close()

    thread = threading.Thread(target=store_b)
    thread.start()
    assert b_stored.wait(10)
    done_a = execution.finish_and_follow([results["a"]], "worker-a", execution.follows([results["a"]]))
    a_stored.set()
    thread.join(10)

    assert done_a.followed == [] and seen[0].followed == []
    assert node_row(run, "c").status == "pending"
    assert advancing.advance_runs([run.pk]) == 1  # the scheduler queues c
    assert advancing.advance_runs([run.pk]) == 0
    assert node_row(run, "c").attempt == 1 and node_row(run, "c").status == "queued"


def test_a_direct_attempt_of_a_cancelled_run_is_dropped(run: Run) -> None:
    advancing.advance_runs([run.pk])
    items, given = take_direct_job()
    runs.cancel_run(run.pk)

    execution.run_batch(items, "worker-t", given)

    assert node_row(run, "a").status == "cancelled"
    assert not RunEvent.objects.filter(run=run, kind="node.attempt").exists()


def test_a_direct_attempt_already_requeued_and_claimed_elsewhere_is_stored_once(run: Run) -> None:
    advancing.advance_runs([run.pk])
    items, given = take_direct_job()
    a = node_row(run, "a")
    requeued = jobs.requeue([(jobs.Ready(a.pk, "default", True, ()), a.attempt)], workers=1)
    [job] = [job for job in waiting_jobs() if job.args[0][0][0] == a.pk]

    assert requeued == 1 and job.args[1] == {}  # the reconciler's jobs are claimed by their worker
    assert execution.run_batch(job.args[0], "worker-2") == 1
    execution.run_batch(items, "worker-t", given)  # the first worker was slow, not dead

    assert node_row(run, "a").worker == "worker-2"
    assert RunEvent.objects.filter(run=run, node_id="a", kind="node.attempt").count() == 1


CHAIN = {
    "nodes": [node("a", "core.echo"), node("b", "core.echo"), node("c", "core.echo"), node("d", "core.echo")],
    "edges": [
        {"source": "a", "target": "b"},
        {"source": "b", "target": "c"},
        {"source": "c", "target": "d", "when": "output.config.missing == 1"},
    ],
}


def test_a_worker_runs_a_linear_successor_itself_each_attempt_recorded_before_and_after(
    redis_clean: None,
) -> None:
    run, _ = runs.start_run(publish("chain", CHAIN), {"user_id": "u-1"})
    advancing.advance_runs([run.pk])
    items, given = take_direct_job()

    with CaptureQueriesContext(connection) as queries:
        assert execution.run_batch(items, "worker-t", given) == 3  # a, then b and c: d's condition fails

    stored = [q["sql"] for q in queries.captured_queries if "json_to_recordset" in q["sql"]]
    assert len(stored) == 3  # one statement per hop: b queued with a's result, c with b's
    assert not waiting_jobs()  # no job and no scheduler's turn between them
    rows = {n: node_row(run, n) for n in ("a", "b", "c", "d")}
    assert [rows[n].status for n in "abcd"] == ["succeeded", "succeeded", "succeeded", "pending"]
    assert rows["b"].queued_at is not None and rows["b"].job_id.startswith("syf-")
    assert rows["c"].output == {
        "input": {"user_id": "u-1"},
        "upstream": {"b": rows["b"].output},
        "config": {},
    }
    assert RunEvent.objects.filter(run=run, kind="node.attempt").count() == 3
    advancing.advance_runs([run.pk])  # the scheduler decides what a condition may change
    assert node_row(run, "d").status == "skipped"
    assert Run.objects.get(pk=run.pk).status == "succeeded"


def test_a_successor_queued_for_a_worker_that_died_is_enqueued_again_by_the_reconciler(
    redis_clean: None, settings: Any
) -> None:
    settings.SWITCHYARD = {**settings.SWITCHYARD, "RECONCILE_AFTER_SECONDS": 0.0}
    run, _ = runs.start_run(publish("chain", CHAIN), {})
    advancing.advance_runs([run.pk])
    items, given = take_direct_job()
    [claim] = execution.given_claims(items, given, {})
    result = execution.Result(claim, *execution.execute(claim, {}))
    done = execution.finish_and_follow([result], "worker-dead", execution.follows([result]))  # then kill -9
    [followed] = done.followed
    assert node_row(run, "b").status == "queued"

    assert reconciler.Reconciler().requeue_lost_jobs(workers=1) == 1

    [job] = waiting_jobs()
    assert [item[0] for item in job.args[0]] == [followed.noderun_id]
    assert execution.run_batch(job.args[0], "worker-2") == 2  # b, claimed by the new worker; then c
    assert node_row(run, "b").status == "succeeded"
    assert RunEvent.objects.filter(run=run, node_id="b", kind="node.attempt").count() == 1


def test_a_worker_ends_the_run_its_last_node_completes_and_the_schedulers_hear_nothing(
    redis_clean: None,
) -> None:
    line = {"nodes": [node(n, "core.echo") for n in "abc"], "edges": [CHAIN["edges"][0], CHAIN["edges"][1]]}
    run, _ = runs.start_run(publish("line", line), {})
    advancing.advance_runs([run.pk])
    items, given = take_direct_job()
    before = bus.client().xlen(bus.NOTICES)
    finishes = bus.client().pubsub()
    finishes.subscribe(bus.scoped(bus.RUNS_CHANNEL))

    assert execution.run_batch(items, "worker-t", given) == 3

    assert bus.client().xlen(bus.NOTICES) == before  # a, b and c ran here, and the run ended here
    run.refresh_from_db()
    assert run.status == "succeeded" and run.finished_at is not None
    assert RunEvent.objects.filter(run=run, kind="run.succeeded").count() == 1
    announced = [m for m in iter(lambda: finishes.get_message(timeout=1), None) if m["type"] == "message"]
    assert [json.loads(m["data"]) for m in announced] == [{"run": run.pk, "status": "succeeded"}]
    assert advancing.advance_runs([run.pk]) == 0  # nothing left for a scheduler


class Statements:
    """Every statement this connection runs, with its parameters (BEGIN and COMMIT are not
    statements here: Django opens and commits transactions through the connection)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        self.seen.append((sql, params))
        return execute(sql, params, many, context)

    def texts(self, *parts: str) -> list[str]:
        return [sql for sql, _ in self.seen if all(part in sql for part in parts)]


def stores_of(statements: Statements) -> list[Any]:
    """The parameters of the worker's result statements (transitions.FINISHES)."""
    return [
        params for sql, params in statements.seen if "json_to_recordset" in sql and "'node.attempt'" in sql
    ]


def test_a_run_continued_by_its_worker_waits_for_the_disk_once_at_its_end(redis_clean: None) -> None:
    """a, b, c in a line, each continued by the worker: a's and b's results commit relaxed,
    each flush owed to the next store, and c's store, which ends the run in the same
    statement (unless a parent waits on it), commits synchronously and flushes them all:
    one wait for the disk, not four, and no statement of the run's end of its own."""
    line = {"nodes": [node(n, "core.echo") for n in "abc"], "edges": CHAIN["edges"][:2]}
    run, _ = runs.start_run(publish("line", line), {})
    advancing.advance_runs([run.pk])
    items, given = take_direct_job()
    statements = Statements()

    with connection.execute_wrapper(statements):
        assert execution.run_batch(items, "worker-t", given) == 3

    stores = stores_of(statements)
    assert [(params["relaxed"], params.get("ends", [])) for params in stores] == [
        (True, []),
        (True, []),
        (False, [run.pk]),
    ]
    assert statements.seen[-1][1] is stores[-1] and not statements.texts(
        "'run.' || status"
    )  # no end of its own
    assert "settled_at IS NULL" in statements.seen[-1][0]  # ended unless a parent waits on it
    assert not statements.texts('"workflows_childrun"') and not statements.texts("pg_logical_emit_message")
    assert Run.objects.get(pk=run.pk).status == "succeeded"


def test_a_batch_of_several_runs_commits_its_store_synchronously(redis_clean: None) -> None:
    """Two runs' roots in one batch: one of them nearly always has a notice to send, so their
    store waits for the disk itself rather than commit relaxed and flush after."""
    line = {"nodes": [node(n, "core.echo") for n in "abc"], "edges": CHAIN["edges"][:2]}
    workflow = publish("line", line)
    started = [runs.start_run(workflow, {"n": n})[0] for n in (1, 2)]
    advancing.advance_runs([run.pk for run in started])
    taken = [job for job in waiting_jobs() if job.args[1]]
    items = [item for job in taken for item in job.args[0]]
    given = {k: v for job in taken for k, v in job.args[1].items()}
    assert {run_id for run_id, *_ in given.values()} == {run.pk for run in started}
    statements = Statements()

    with connection.execute_wrapper(statements):
        assert execution.run_batch(items, "worker-t", given) == 6

    assert stores_of(statements)[0]["relaxed"] is False
    assert {Run.objects.get(pk=run.pk).status for run in started} == {"succeeded"}


def test_a_flush_owed_to_a_successor_that_stored_nothing_is_paid_by_its_store(redis_clean: None) -> None:
    """b, queued by a's relaxed store for this worker, is cancelled before its result is
    stored: b's store, synchronous (b may end the run), writes nothing and so flushes
    nothing; the flush a's store left owed is paid after it."""
    pair = {"nodes": [node(n, "core.echo") for n in "ab"], "edges": [CHAIN["edges"][0]]}
    run, _ = runs.start_run(publish("pair", pair), {})
    advancing.advance_runs([run.pk])
    items, given = take_direct_job()
    statements = Statements()

    def cancel_b_once_queued(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        done = execute(sql, params, many, context)
        if isinstance(params, dict) and params.get("follows"):
            NodeRun.objects.filter(run=run, node_id="b").update(status="cancelled")
        return done

    with connection.execute_wrapper(statements), connection.execute_wrapper(cancel_b_once_queued):
        assert execution.run_batch(items, "worker-t", given) == 2  # a, then b

    stores = stores_of(statements)
    assert [(params["relaxed"], params.get("ends", [])) for params in stores] == [
        (True, []),
        (False, [run.pk]),
    ]
    assert [sql for sql, _ in statements.seen][-1] == statements.texts("pg_logical_emit_message")[0]
    assert node_row(run, "a").status == "succeeded" and node_row(run, "b").status == "cancelled"
    assert Run.objects.get(pk=run.pk).status == "running"  # not ended: b did not succeed


def test_stores_are_durable_before_anyone_hears_of_them(run: Run) -> None:
    """a and b succeed, queueing c for this worker, while `slow` is still queued: their run has
    a notice to send, so their relaxed store is flushed first. Then c (a sink) succeeds: its
    store, which might end the run, commits synchronously; nothing ends (slow is queued),
    and the notice follows with no flush of its own."""
    advancing.advance_runs([run.pk])
    items, given = take_direct_job()
    statements = Statements()
    before = bus.client().xlen(bus.NOTICES)

    notices_at_flush = []

    def flushing(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if "pg_logical_emit_message" in sql:
            notices_at_flush.append(bus.client().xlen(bus.NOTICES))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(statements), connection.execute_wrapper(flushing):
        assert execution.run_batch(items, "worker-t", given) == 3  # a and b, then c

    assert [params["relaxed"] for params in stores_of(statements)] == [True, False]
    order = [params for _, params in statements.seen]
    assert [sql for sql, _ in statements.seen][order.index(stores_of(statements)[0]) + 1] == statements.texts(
        "pg_logical_emit_message"
    )[0]
    # the first store's notice (slow is still queued) was sent after its flush, c's after its store
    assert notices_at_flush == [before] and bus.client().xlen(bus.NOTICES) == before + 2
    assert Run.objects.get(pk=run.pk).status == "running" and node_row(run, "c").status == "succeeded"


def test_a_run_that_fails_is_left_to_the_schedulers(redis_clean: None) -> None:
    line = {"nodes": [node("a", "core.echo"), node("b", "core.fail")], "edges": [CHAIN["edges"][0]]}
    run, _ = runs.start_run(publish("failing", line), {})
    advancing.advance_runs([run.pk])
    items, given = take_direct_job()
    before = bus.client().xlen(bus.NOTICES)

    execution.run_batch(items, "worker-t", given)
    for job in waiting_jobs():
        execution.run_batch(job.args[0], "worker-t", job.args[1])

    notices = bus.parse_notices(bus.client().xrange(bus.NOTICES))[before:]
    assert run.pk in {r for n in notices for r in n.run_ids}
    assert Run.objects.get(pk=run.pk).status == "running"  # the scheduler retries or kills b
