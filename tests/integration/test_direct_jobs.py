"""Direct jobs: batchable nodes' jobs carry what their attempts are given, and run unclaimed.

Real PostgreSQL and Redis; the scheduler's and the worker's steps are called in this process.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rq.job import Job

from tests.integration.conftest import node, publish
from workflows.runs import actions as runs
from workflows.runtime import advancing, bus, execution, jobs, reconciler
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


def test_a_direct_job_runs_unclaimed_and_its_successor_is_given_its_predecessors_outputs(run: Run) -> None:
    advancing.advance_runs([run.pk])
    items, given = take_direct_job()

    with CaptureQueriesContext(connection) as queries:
        assert execution.run_batch(items, "worker-t", given) == 2

    assert not [q for q in queries.captured_queries if "SET status = 'running'" in q["sql"]]  # no claim
    assert {node_row(run, n).worker for n in ("a", "b")} == {"worker-t"}
    advancing.advance_runs([run.pk])
    _, given = take_direct_job()
    [(run_id, _, upstream)] = given.values()
    assert run_id == run.pk
    assert {p: execution.from_json(output) for p, output in upstream.items()} == {
        n: node_row(run, n).output for n in ("a", "b")
    }


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


def test_the_schedulers_hear_of_a_continued_chain_only_when_there_is_something_to_decide(
    redis_clean: None,
) -> None:
    line = {"nodes": [node(n, "core.echo") for n in "abc"], "edges": [CHAIN["edges"][0], CHAIN["edges"][1]]}
    run, _ = runs.start_run(publish("line", line), {})
    advancing.advance_runs([run.pk])
    items, given = take_direct_job()
    before = bus.client().xlen(bus.NOTICES)

    assert execution.run_batch(items, "worker-t", given) == 3

    notices = bus.parse_notices(bus.client().xrange(bus.NOTICES))[before:]
    assert [n.run_ids for n in notices] == [[run.pk]]  # after c: the run is to finish
    assert {row[2]: row[3] for row in notices[0].rows} == dict.fromkeys("abc", "succeeded")
    assert advancing.advance_runs([run.pk], known=notices[0].rows) == 1
    assert Run.objects.get(pk=run.pk).status == "succeeded"
