"""Slots (runtime/slots.py), real processes: one worker holds hundreds of LLM calls at once.

The fake provider holds every stream before its first chunk until the test lets it go
(`gated`), so "N calls in flight on one worker" is a fact the test waits for, not a timing.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Count
from django.test import Client

from tests.fakes.llm_server import FakeLLMServer
from tests.integration import agent_tools  # noqa: F401  (registers the test tools here too)
from tests.integration.conftest import node, publish, wait_finished
from tests.integration.runtime import Runtime, wait_for
from tests.integration.test_agent import MODULES, agent_flow, completion
from workflows.runs import actions as runs
from workflows.runtime import bus
from workflows.store.models import AgentStep, LLMCall, LLMProvider, NodeRun, Run, RunEvent

# 500 is the figure; a busy 2-core CI box may ask for fewer (SLOTS_TEST_STREAMS).
STREAMS = int(os.environ.get("SLOTS_TEST_STREAMS", "500"))
AGENTS = int(os.environ.get("SLOTS_TEST_AGENTS", "100"))
SLOTS = max(STREAMS, AGENTS) + 20  # every call the tests hold at once, and some to spare
WORKER_ENV = {"SWITCHYARD_WORKER_SLOTS": str(SLOTS)}


@pytest.fixture
def fake() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(gated=True, chunk_delay=0.05) as server:
        yield server


@pytest.fixture
def rt(transactional_db: Any, redis_clean: None, fake: FakeLLMServer) -> Iterator[Runtime]:
    LLMProvider.objects.create(name="fakeco", base_url=fake.base_url, default_model="m", is_default=True)
    runtime = Runtime(**WORKER_ENV)
    yield runtime
    fake.go.set()
    runtime.stop()


def chat(slug: str, max_attempts: int = 1, **fields: Any) -> Any:
    config = {"prompt": "number {input.n}", "timeout_seconds": 120}
    retry = {"max_attempts": max_attempts, "backoff_seconds": 0.1}
    return publish(
        slug,
        {
            "nodes": [node("ask", "llm.chat", config=config, retry=retry, timeout_seconds=180, **fields)],
            "edges": [],
        },
    )


def start(rt: Runtime, *workers: str) -> None:
    for name in workers:
        rt.worker(name)
    rt.scheduler("s1")
    rt.wait_ready()


def start_runs(workflow: Any, count: int) -> list[Run]:
    return [runs.start_run(workflow, {"n": n})[0] for n in range(count)]


def heartbeat(worker: str) -> dict[str, Any]:
    raw = bus.client().get(bus.worker_key(worker))
    return json.loads(raw) if raw else {}


def in_flight(fake: FakeLLMServer, count: int, timeout: float = 120) -> None:
    wait_for(lambda: fake.held >= count, timeout, f"{count} calls held in flight at the provider")


def all_finished(started: list[Run], timeout: float = 180) -> list[Run]:
    ids = [r.pk for r in started]

    def done() -> bool:
        return not Run.objects.filter(pk__in=ids).exclude(status__in=["succeeded", "failed"]).exists()

    wait_for(done, timeout, f"{len(ids)} runs to finish")
    return list(Run.objects.filter(pk__in=ids).order_by("pk"))


def errors(started: list[Run]) -> list[tuple[str, int, str]]:
    """The errors of the failed attempts of these runs (for a failing assertion)."""
    spans = RunEvent.objects.filter(run__in=started, kind="node.attempt", data__status="failed")
    return [(s.node_id, s.attempt, s.data.get("error", "")) for s in spans[:5]]


def assert_answered_once_each(started: list[Run]) -> None:
    """Every run succeeded with its own answer, one recorded call and one stored attempt."""
    finished = all_finished(started)
    assert {r.status for r in finished} == {"succeeded"}, errors(finished)
    outputs = dict(NodeRun.objects.filter(run__in=finished).values_list("run_id", "output"))
    for n, run in enumerate(finished):
        assert outputs[run.pk]["content"] == f"echo: number {n}"
    calls = LLMCall.objects.filter(run__in=finished).values("node_run_id", "attempt").annotate(n=Count("id"))
    assert {c["n"] for c in calls} == {1} and len(calls) == len(finished)
    spans = RunEvent.objects.filter(run__in=finished, kind="node.attempt", data__status="succeeded")
    assert spans.values("run_id").annotate(n=Count("id")).filter(n__gt=1).count() == 0
    assert spans.count() == len(finished)
    logs = [span.data.get("log", "") for span in spans]  # each its own call's records, no other's
    assert {log.count("HTTP Request: POST") for log in logs} == {1}


def test_one_worker_process_streams_hundreds_of_llm_calls_at_once_and_each_answer_is_right(
    rt: Runtime, fake: FakeLLMServer, settings: Any
) -> None:
    start(rt, "w1")
    started = start_runs(chat("many"), STREAMS)

    in_flight(fake, STREAMS)
    assert NodeRun.objects.filter(status="running", worker="w1").count() == STREAMS  # claimed in PG
    wait_for(lambda: heartbeat("w1").get("slots_used") == STREAMS, 10, "the heartbeat to show the slots used")
    assert heartbeat("w1")["slots_free"] == SLOTS - STREAMS
    assert_slots_shown(settings, used=STREAMS, total=SLOTS)
    fake.go.set()

    assert_answered_once_each(started)
    wait_for(lambda: heartbeat("w1").get("slots_used") == 0, 10, "the slots to be free again")


def assert_slots_shown(settings: Any, used: int, total: int) -> None:
    """The workers page and /metrics show the worker's slots used and free."""
    settings.MONITOR = {**settings.MONITOR, "METRICS_TOKEN": "slots"}
    metrics = Client().get("/metrics", headers={"Authorization": "Bearer slots"}).content.decode()
    assert f'switchyard_worker_slots{{state="used",worker="w1"}} {used}.0' in metrics
    assert f'switchyard_worker_slots{{state="free",worker="w1"}} {total - used}.0' in metrics
    admin = Client()
    admin.force_login(get_user_model().objects.create_superuser("slots-admin"))
    assert f"{used} / {total}" in admin.get("/workers/").content.decode()


def test_a_worker_killed_with_hundreds_of_calls_in_flight_loses_none_and_doubles_none(
    rt: Runtime, fake: FakeLLMServer
) -> None:
    start(rt, "w1")
    started = start_runs(chat("killed", max_attempts=1), STREAMS)
    in_flight(fake, STREAMS)

    rt.kill("w1")
    fake.go.set()
    rt.worker("w2")

    assert_answered_once_each(started)  # max_attempts 1: the lost attempt cost no retry
    assert set(NodeRun.objects.filter(run__in=started).values_list("attempt", "worker")) == {(2, "w2")}
    lost = RunEvent.objects.filter(run__in=started, kind="node.lost", data__worker="w1")
    assert sorted(lost.values_list("run_id", flat=True)) == sorted(r.pk for r in started)


@pytest.mark.parametrize("streams", [20])
def test_a_stopped_worker_lets_its_calls_in_flight_finish_and_takes_no_new_job(
    rt: Runtime, fake: FakeLLMServer, streams: int
) -> None:
    rt.env["SWITCHYARD_WORKER_DRAIN_SECONDS"] = "60"
    start(rt, "w1")
    workflow = chat("drained")
    started = start_runs(workflow, streams)
    in_flight(fake, streams)

    rt.procs["w1"].send_signal(signal.SIGTERM)
    later = runs.start_run(workflow, {"n": 99})[0]  # queued while w1 drains: it must not take it
    wait_for(lambda: heartbeat("w1").get("slots_used") == streams, 10, "w1 to beat on while draining")
    fake.go.set()

    assert rt.procs["w1"].wait(60) == 0
    assert_answered_once_each(started)
    assert set(NodeRun.objects.filter(run__in=started).values_list("attempt", "worker")) == {(1, "w1")}
    assert NodeRun.objects.get(run=later).worker == ""


def test_a_stopped_worker_hands_back_the_calls_still_in_flight_at_the_drain_deadline(
    rt: Runtime, fake: FakeLLMServer
) -> None:
    rt.env["SWITCHYARD_WORKER_DRAIN_SECONDS"] = "2"
    start(rt, "w1")
    started = start_runs(chat("handed-back"), 20)
    in_flight(fake, 20)

    rt.procs["w1"].send_signal(signal.SIGTERM)

    assert rt.procs["w1"].wait(20) == 0
    lost = RunEvent.objects.filter(run__in=started, kind="node.lost", data__worker="w1")
    assert lost.count() == 20
    fake.go.set()
    rt.worker("w2")
    assert_answered_once_each(started)
    assert set(NodeRun.objects.filter(run__in=started).values_list("attempt", "worker")) == {(2, "w2")}


def test_a_cpu_bound_handler_beside_busy_slots_keeps_its_time_limit(rt: Runtime, fake: FakeLLMServer) -> None:
    start(rt, "w1")
    started = start_runs(chat("busy"), 20)
    in_flight(fake, 20)
    slow = node("spin", "core.delay", config={"seconds": 60}, timeout_seconds=1, retry={"max_attempts": 1})
    spin = runs.start_run(publish("spin", {"nodes": [slow], "edges": []}), {})[0]

    assert wait_finished(spin, 30).status == "failed"
    row = NodeRun.objects.get(run=spin)
    assert (row.worker, row.error) == ("w1", "Node 'spin' timed out after 1 s.")
    assert fake.open_streams == 20  # the slots held on meanwhile
    fake.go.set()
    assert_answered_once_each(started)


def test_slots_never_run_more_calls_of_a_node_than_its_cap(rt: Runtime, fake: FakeLLMServer) -> None:
    start(rt, "w1")
    started = start_runs(chat("capped", max_in_flight=3), 12)
    in_flight(fake, 3)  # the cap's worth held open at the provider at once (the gate: no timing)
    fake.go.set()

    assert_answered_once_each(started)
    assert fake.most_open == 3  # and never a fourth, held or not


def second_turn(request: Any) -> bool:
    return any(m["role"] == "tool" for m in request["messages"])


def note_then_answer(request: Any) -> dict[str, Any]:
    """Turn 1: call test.record with the user's words; turn 2: answer."""
    who = request["messages"][-1]["content"] if not second_turn(request) else ""
    if who:
        return completion(None, ("test__record", {"note": who}))
    return completion("Noted.")


def test_a_worker_killed_with_many_agents_mid_loop_repeats_no_recorded_step(
    rt: Runtime, fake: FakeLLMServer, tmp_path: Path
) -> None:
    fake.gated, fake.reply = second_turn, note_then_answer  # every agent holds at its second turn
    rt.env["SWITCHYARD_HANDLER_MODULES"] = MODULES
    start(rt, "w1")
    log = tmp_path / "tools.log"
    agent = publish("agents", agent_flow(["test.record"], max_attempts=1))
    started = [runs.start_run(agent, {"who": f"u{n}", "log": str(log)})[0] for n in range(AGENTS)]
    in_flight(fake, AGENTS)

    rt.kill("w1")
    fake.go.set()
    rt.worker("w2")

    assert {r.status for r in all_finished(started)} == {"succeeded"}, errors(started)
    recorded = AgentStep.objects.filter(node_run__run__in=started)
    per_run = recorded.values("node_run_id").annotate(n=Count("id"))
    assert {r["n"] for r in per_run} == {3} and len(per_run) == AGENTS
    assert sorted(set(recorded.values_list("seq", "kind", "attempt"))) == [
        (1, "turn", 1),
        (2, "tool", 1),
        (3, "turn", 2),
    ]
    assert len(log.read_text().splitlines()) == AGENTS, "each tool call ran once"


def test_a_worker_without_slots_runs_llm_calls_one_at_a_time_as_before(
    rt: Runtime, fake: FakeLLMServer
) -> None:
    fake.gated = False
    rt.env["SWITCHYARD_WORKER_SLOTS"] = "0"
    start(rt, "w1")
    started = start_runs(chat("one-by-one"), 3)

    assert_answered_once_each(started)
    assert fake.most_open == 1
    assert "slots" not in heartbeat("w1")


def test_a_slot_attempt_after_its_connection_was_cut_gets_a_new_one(rt: Runtime, fake: FakeLLMServer) -> None:
    fake.gated = False
    start(rt, "w1")
    workflow = chat("cut", max_attempts=3)
    assert_answered_once_each(start_runs(workflow, 1))  # the slots' sync thread now has a connection
    with connection.cursor() as cur:  # as a PostgreSQL restart does to every connection but ours
        cur.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    (run,) = start_runs(workflow, 1)
    # `make chaos` found the node dead: every later attempt failed with "the connection is closed".
    assert wait_finished(run).status == "succeeded", errors([run])
