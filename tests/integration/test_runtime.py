"""The engine end to end: real Postgres, real Redis, real RQ workers and schedulers."""

from __future__ import annotations

import signal
from typing import Any

import pytest
from rq.job import Job

from tests.integration.conftest import node, publish, wait_finished
from tests.integration.runtime import Runtime, wait_for
from workflows.handlers.demo import DEMO_PROFILE, DEMO_RETRIES
from workflows.runs import actions as runs
from workflows.runtime import bus
from workflows.store.models import DeadLetter, NodeRun, Run, RunEvent

DEMO_PROFILE_NODES = [n["id"] for n in DEMO_PROFILE["nodes"]]


def nodes_of(run: Run) -> dict[str, NodeRun]:
    return {n.node_id: n for n in run.nodes.all()}


def test_demo_runs_to_success_with_correct_outputs(runtime: Runtime) -> None:
    workflow = publish("demo-profile", DEMO_PROFILE)
    run, created = runs.start_run(workflow, {"user_id": "u-42"})
    assert created
    assert wait_finished(run).status == "succeeded"
    result = nodes_of(run)
    assert {n.status for n in result.values()} == {"succeeded"}
    rec = result["recommendation_engine"].output
    assert rec["user_id"] == "u-42"
    assert rec["inputs"] == ["enrich_location", "fetch_profile", "sentiment_analysis"]
    assert result["sentiment_analysis"].output["user_id"] == "u-42"
    spans = RunEvent.objects.filter(run=run, kind="node.attempt")
    assert sorted(spans.values_list("node_id", flat=True)) == sorted(result)
    assert all(s.started_at <= s.at for s in spans)


def test_retry_succeeds_on_the_third_attempt_and_exhausted_retries_become_a_dead_letter(
    runtime: Runtime,
) -> None:
    workflow = publish("demo-retries", DEMO_RETRIES)
    run, _ = runs.start_run(workflow, {})
    assert wait_finished(run).status == "failed"
    result = nodes_of(run)
    assert (result["flaky_call"].status, result["flaky_call"].attempt) == ("succeeded", 3)
    assert result["flaky_call"].output == {"attempt": 3}
    assert (result["always_fails"].status, result["always_fails"].attempt) == ("dead", 2)
    assert result["report"].status == "succeeded", "all_done lets the run go on past a dead node"
    letter = DeadLetter.objects.get(run=run)
    assert letter.node_id == "always_fails"
    assert "upstream API is down" in letter.error
    assert letter.input_snapshot["upstream"] == {"prepare": result["prepare"].output}
    kinds = list(RunEvent.objects.filter(run=run, node_id="flaky_call").values_list("kind", flat=True))
    assert kinds.count("node.retry_scheduled") == 2


def test_a_node_over_its_timeout_fails_with_a_timeout_error(runtime: Runtime) -> None:
    workflow = publish(
        "slow", {"nodes": [node("sleepy", "core.delay", config={"seconds": 5}, timeout_seconds=0.3)]}
    )
    run, _ = runs.start_run(workflow, {})
    assert wait_finished(run).status == "failed"
    sleepy = nodes_of(run)["sleepy"]
    assert sleepy.status == "dead"
    assert "timed out after 0.3 s" in sleepy.error


def test_cancel_mid_run_stops_queued_nodes_and_ignores_running_results(runtime: Runtime) -> None:
    definition = {
        "nodes": [node("slow", "core.delay", config={"seconds": 1.0}), node("after")],
        "edges": [{"source": "slow", "target": "after"}],
    }
    run, _ = runs.start_run(publish("cancel-me", definition), {})
    wait_for(
        lambda: NodeRun.objects.filter(run=run, node_id="slow", status="running").exists(), 30, "slow to run"
    )
    runs.cancel_run(run.pk)
    run.refresh_from_db()
    assert run.status == "cancelled"
    # The worker finishes its sleep and drops the job; its result must be ignored.
    slow = NodeRun.objects.get(run=run, node_id="slow")
    job_key = Job.key_for(slow.job_id)
    wait_for(lambda: not bus.client().exists(job_key), 30, "the cancelled attempt's job to end")
    assert not RunEvent.objects.filter(run=run, kind="node.attempt").exists()
    result = nodes_of(run)
    assert result["slow"].status == "cancelled"
    assert result["after"].status == "cancelled"
    assert result["after"].attempt == 0


def test_hot_reload_new_runs_take_the_new_version_and_runs_in_flight_stay_pinned(runtime: Runtime) -> None:
    v1 = {
        "nodes": [node("slow", "core.delay", config={"seconds": 0.8}), node("v1_tail")],
        "edges": [{"source": "slow", "target": "v1_tail"}],
    }
    v2 = {"nodes": [node("first"), node("v2_tail")], "edges": [{"source": "first", "target": "v2_tail"}]}
    workflow = publish("reload", v1)
    wait_for(lambda: _scheduler_sees(workflow.pk, workflow.active_version_id), 30, "scheduler to load v1")
    old_run, _ = runs.start_run(workflow, {})
    wait_for(lambda: NodeRun.objects.filter(run=old_run, node_id="slow", status="running").exists(), 30)
    workflow = publish("reload", v2)
    wait_for(lambda: _scheduler_sees(workflow.pk, workflow.active_version_id), 30, "scheduler to swap in v2")
    new_run, _ = runs.start_run(workflow, {})
    assert wait_finished(new_run).status == "succeeded"
    assert wait_finished(old_run).status == "succeeded"
    assert set(nodes_of(old_run)) == {"slow", "v1_tail"}
    assert set(nodes_of(new_run)) == {"first", "v2_tail"}
    assert old_run.version_id != new_run.version_id


def _scheduler_sees(workflow_id: int, version_id: int) -> bool:
    import json

    raw = bus.client().get(bus.scheduler_key("scheduler-1"))
    return bool(raw) and json.loads(raw)["active_versions"].get(str(workflow_id)) == version_id


def test_two_schedulers_start_a_fan_in_successor_exactly_once(runtime: Runtime) -> None:
    runtime.scheduler("scheduler-2")
    runtime.worker("worker-3")
    runtime.wait_ready()
    width = 12
    definition = {
        "nodes": [node("root"), *[node(f"b{i}") for i in range(width)], node("join")],
        "edges": [{"source": "root", "target": f"b{i}"} for i in range(width)]
        + [{"source": f"b{i}", "target": "join"} for i in range(width)],
    }
    workflow = publish("fan-in", definition)
    started = [runs.start_run(workflow, {})[0] for _ in range(40)]
    for run in started:
        assert wait_finished(run).status == "succeeded"
    joins = NodeRun.objects.filter(run__in=started, node_id="join")
    assert sorted(set(joins.values_list("attempt", flat=True))) == [1]
    spans = RunEvent.objects.filter(run__in=started, node_id="join", kind="node.attempt").count()
    assert spans == len(started)


def test_kill_9_of_a_worker_mid_node_loses_no_run(runtime: Runtime) -> None:
    # Long enough that the kill lands mid-node even on a busy machine. One attempt allowed:
    # an attempt lost with its worker does not count against the retry policy.
    definition = {"nodes": [node("slow", "core.delay", config={"seconds": 3.0}, retry={"max_attempts": 1})]}
    run, _ = runs.start_run(publish("kill-worker", definition), {})
    running = wait_for(
        lambda: NodeRun.objects.filter(run=run, node_id="slow", status="running").first(), 30, "slow to start"
    )
    victim = "worker-1" if running.worker == "worker-1" else "worker-2"
    assert running.worker == victim
    runtime.kill(victim, signal.SIGKILL)
    assert wait_finished(run).status == "succeeded"
    slow = nodes_of(run)["slow"]
    assert (slow.attempt, slow.tries, slow.lost) == (2, 1, 1)
    assert slow.worker != victim
    assert RunEvent.objects.filter(run=run, kind="node.lost").count() == 1


def test_kill_9_of_a_worker_mid_chain_loses_no_node_and_records_none_twice(runtime: Runtime) -> None:
    # A worker continues a linear chain itself (execution.follows): kill it mid-chain; the
    # successor it had queued waits for no job, the reconciler enqueues it again and the
    # other worker goes on from there.
    length = 600
    definition = {
        "nodes": [node(f"n{i}", "core.noop") for i in range(length)],
        "edges": [{"source": f"n{i}", "target": f"n{i + 1}"} for i in range(length - 1)],
    }
    run, _ = runs.start_run(publish("long-chain", definition), {})
    done = NodeRun.objects.filter(run=run, status="succeeded")
    wait_for(lambda: done.count() >= 20, 60, "the chain to get going")
    victim = done.order_by("-finished_at").first()
    assert victim is not None and done.count() < length, "the chain ran out before the kill"
    runtime.kill(victim.worker, signal.SIGKILL)

    assert wait_finished(run, timeout=120).status == "succeeded"
    assert done.count() == length
    assert RunEvent.objects.filter(run=run, kind="node.attempt").count() == length
    survivor = "worker-1" if victim.worker == "worker-2" else "worker-2"
    assert nodes_of(run)[f"n{length - 1}"].worker == survivor


def test_kill_9_of_the_scheduler_mid_run_loses_no_run(runtime: Runtime) -> None:
    workflow = publish("demo-profile", DEMO_PROFILE)
    started = [runs.start_run(workflow, {"user_id": f"u-{i}"})[0] for i in range(30)]
    runtime.kill("scheduler-1", signal.SIGKILL)
    more = [runs.start_run(workflow, {"user_id": f"v-{i}"})[0] for i in range(10)]
    runtime.scheduler("scheduler-2")
    for run in started + more:
        assert wait_finished(run).status == "succeeded"
    assert NodeRun.objects.filter(run__in=started + more).exclude(attempt=1).count() == 0


def test_redis_flushed_mid_run_loses_no_run(runtime: Runtime) -> None:
    definition = {
        "nodes": [node("a", "core.delay", config={"seconds": 0.2}), node("b"), node("c")],
        "edges": [{"source": "a", "target": "b"}, {"source": "b", "target": "c"}],
    }
    workflow = publish("flush", definition)
    started = [runs.start_run(workflow, {})[0] for _ in range(20)]
    wait_for(lambda: NodeRun.objects.filter(run__in=started, status="running").exists(), 30)
    bus.client().flushdb()  # its own database: under xdist another worker uses the next one
    for run in started:
        assert wait_finished(run).status == "succeeded"


@pytest.mark.usefixtures("lone_starts")
def test_a_start_whose_first_jobs_never_reached_redis_loses_no_run(transactional_db: Any) -> None:
    """As if the starting process died between its commit and its push: the roots are queued
    in Postgres and their job is nowhere; the reconciler enqueues them again, same attempt."""
    workflow = publish("demo-profile", DEMO_PROFILE)
    run, _ = runs.start_run(workflow, {"user_id": "u-1"})
    assert set(run.nodes.filter(status="queued").values_list("node_id", flat=True)) == {
        "fetch_profile",
        "enrich_location",
    }
    bus.client().flushdb()  # its own database: under xdist another worker uses the next one
    rt = Runtime()
    try:
        rt.worker("worker-1")
        rt.scheduler("scheduler-1")
        assert wait_finished(run).status == "succeeded"
    finally:
        rt.stop()
    assert {n.node_id: n.attempt for n in run.nodes.all()} == dict.fromkeys(DEMO_PROFILE_NODES, 1)


def test_replaying_a_dead_letter_carries_the_run_on_and_a_second_replay_is_refused(runtime: Runtime) -> None:
    definition = {
        "nodes": [
            node("prepare", "core.echo"),
            node(
                "call",
                "core.flaky",
                config={"succeed_on_attempt": 3},
                retry={"max_attempts": 2, "backoff_seconds": 0.05},
            ),
            node("after", "core.echo"),
        ],
        "edges": [{"source": "prepare", "target": "call"}, {"source": "call", "target": "after"}],
    }
    run, _ = runs.start_run(publish("replay", definition), {"x": 1})
    assert wait_finished(run).status == "failed"
    assert nodes_of(run)["after"].status == "upstream_failed"
    prepare_finished = nodes_of(run)["prepare"].finished_at
    letter = DeadLetter.objects.get(run=run)
    runs.replay_dead_letter(letter.pk)
    assert wait_finished(run).status == "succeeded"
    result = nodes_of(run)
    assert (result["call"].status, result["call"].attempt) == ("succeeded", 3)
    assert result["prepare"].finished_at == prepare_finished, "completed nodes are not run again"
    assert result["after"].output["upstream"] == {"call": {"attempt": 3}}
    _assert_refused(lambda: runs.replay_dead_letter(letter.pk), "already replayed")


def _assert_refused(call: Any, fragment: str) -> None:
    from workflows.store.errors import Conflict

    try:
        call()
    except Conflict as exc:
        assert fragment in str(exc)
    else:
        raise AssertionError("expected a Conflict")


def test_a_run_started_with_bad_input_carries_on_after_a_replay_with_edited_input(runtime: Runtime) -> None:
    schema = {"type": "object", "properties": {"user_id": {"type": "string"}}, "required": ["user_id"]}
    definition = {
        "nodes": [
            node("check", "core.validate", config={"schema": schema}, retry={"max_attempts": 1}),
            node("after", "core.echo"),
        ],
        "edges": [{"source": "check", "target": "after"}],
    }
    run, _ = runs.start_run(publish("validated", definition), {"user": 7})
    assert wait_finished(run).status == "failed"
    letter = DeadLetter.objects.get(run=run)
    assert "input: 'user_id' is a required property" in letter.error

    runs.replay_dead_letter(letter.pk, edited_input={"user_id": "u-7"})

    assert wait_finished(run).status == "succeeded"
    result = nodes_of(run)
    assert (result["check"].attempt, result["check"].output) == (2, {"user_id": "u-7"})
    after = result["after"].output
    assert after["upstream"] == {"check": {"user_id": "u-7"}}, "the fix travels on in the node's output"
    assert after["input"] == {"user": 7} == Run.objects.get(pk=run.pk).input, "the run's input is kept"


def test_a_capped_node_never_runs_more_attempts_at_once_than_its_cap(runtime: Runtime) -> None:
    definition = {"nodes": [node("call", "core.delay", config={"seconds": 0.3}, max_in_flight=1)]}
    workflow = publish("capped-call", definition)
    started = [runs.start_run(workflow, {"n": i})[0] for i in range(4)]

    for run in started:
        assert wait_finished(run).status == "succeeded"
    spans = sorted(NodeRun.objects.filter(run__in=started).values_list("started_at", "finished_at"))
    for (_, finished), (next_started, _) in zip(spans, spans[1:], strict=False):
        assert next_started >= finished, "two attempts of a node capped at 1 overlapped"


def test_a_rate_limited_node_never_starts_more_attempts_per_window_than_its_count(runtime: Runtime) -> None:
    definition = {"nodes": [node("call", "core.noop", rate_limit={"count": 2, "per_seconds": 1.0})]}
    workflow = publish("rated-call", definition)
    started = [runs.start_run(workflow, {"n": i})[0] for i in range(5)]

    for run in started:
        assert wait_finished(run).status == "succeeded"
    admitted = sorted(NodeRun.objects.filter(run__in=started).values_list("queued_at", flat=True))
    for earlier, later in zip(admitted, admitted[2:], strict=False):
        # a third start within one second of the first two would break the limit; 0.1 s of slack
        # covers the scheduler's clock (the window) against Postgres's (queued_at).
        assert (later - earlier).total_seconds() >= 0.9


def test_a_notice_naming_a_deleted_version_or_run_is_skipped_and_the_scheduler_lives_on(
    runtime: Runtime,
) -> None:
    """A notice written before its run or version was deleted (a test emptying the tables, a
    restore) used to end the scheduler with DoesNotExist; it is logged and skipped."""
    workflow = publish("after-stale-notices", {"nodes": [node("a"), node("b")], "edges": []})
    missing = workflow.active_version_id + 1000
    # The rows a writer carries (advancing.SNAPSHOT_SQL's shape) of a run and version gone,
    # and a run id alone that never existed; in one batch with a live run's notice below.
    bus.notify([987654], rows=[[1, 987654, "a", "succeeded", 1, missing, 0, True]])
    bus.notify([987655])
    run, _ = runs.start_run(workflow, {})
    assert wait_finished(run).status == "succeeded"
    assert runtime.procs["scheduler-1"].poll() is None
    bus.notify([987656], rows=[[2, 987656, "a", "succeeded", 1, missing, 0, True]])
    later, _ = runs.start_run(workflow, {})
    assert wait_finished(later).status == "succeeded"
    assert runtime.procs["scheduler-1"].poll() is None
