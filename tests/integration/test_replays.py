"""Replay of recorded calls in forks, end to end: real workers and scheduler, the fake provider
counting the calls it gets, a tool that leaves a line per real run."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.llm_server import FakeLLMServer
from tests.integration.conftest import node, publish, two_workers_and_a_scheduler, wait_finished
from tests.integration.runtime import Runtime
from tests.integration.test_agent import MODULES, agent_flow, completion, scripted, tool_log
from workflows.forks import forking
from workflows.runs import actions as runs
from workflows.store.models import LLMCall, NodeRun, RecordedCall, Run


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        fake.reply = scripted(completion(None, ("test__record", {"note": "first"})), completion("Noted."))
        yield fake


@pytest.fixture(params=["100"])
def replay_runtime(
    request: pytest.FixtureRequest, transactional_db: Any, redis_clean: None, llm: FakeLLMServer
) -> Iterator[Runtime]:
    """Two workers and a scheduler; `SWITCHYARD_WORKER_SLOTS` from the param (100, the default:
    calls awaited in slots; "0": the one-at-a-time path)."""
    yield from two_workers_and_a_scheduler(
        LLM_BASE_URL=llm.base_url,
        LLM_MODEL="fake-model",
        SWITCHYARD_HANDLER_MODULES=MODULES,
        SWITCHYARD_WORKER_SLOTS=request.param,
    )


def agent_run(log: Path, **config: Any) -> Run:
    """A finished run of the agent workflow: one tool call, then an answer (two model turns)."""
    run, _ = runs.start_run(
        publish("agent", agent_flow(["test.record"], **config)), {"who": "ana", "log": str(log)}
    )
    assert wait_finished(run).status == "succeeded"
    return run


def outputs(run: Run) -> dict[str, Any]:
    return dict(NodeRun.objects.filter(run=run).values_list("node_id", "output"))


@pytest.mark.parametrize("replay_runtime", ["100", "0"], indirect=True, ids=["slots", "no-slots"])
def test_recorded_mode_of_an_agent_run_makes_no_provider_call_runs_no_tool_and_reproduces_the_output(
    replay_runtime: Runtime, llm: FakeLLMServer, tmp_path: Path
) -> None:
    log = tmp_path / "tools.log"
    origin = agent_run(log)
    assert len(llm.requests) == 2 and len(tool_log(log)) == 1

    fork = wait_finished(forking.fork_run(origin.pk, "agent", calls="recorded"))

    assert fork.status == "succeeded"
    assert len(llm.requests) == 2, "the provider got no call"
    assert len(tool_log(log)) == 1, "the tool did not run again"
    assert outputs(fork) == outputs(origin)
    calls = list(LLMCall.objects.filter(run=fork).order_by("id"))
    assert [(c.step, c.cost) for c in calls] == [("replayed turn 1", 0), ("replayed turn 3", 0)]
    replayed = list(RecordedCall.objects.filter(run=fork).order_by("id"))
    assert [(r.kind, r.outcome) for r in replayed] == [
        ("llm", "replayed"),
        ("tool", "replayed"),
        ("llm", "replayed"),
    ]
    sources = {r.replayed_from.run_id for r in replayed if r.replayed_from}  # type: ignore[union-attr]
    assert sources == {origin.pk}
    assert all(r.request_hash == r.replayed_from.request_hash for r in replayed)  # type: ignore[union-attr]


def test_a_changed_system_prompt_replays_no_model_turn_under_recorded_then_live_and_fails_recorded_mode(
    replay_runtime: Runtime, llm: FakeLLMServer, tmp_path: Path
) -> None:
    log = tmp_path / "tools.log"
    origin = agent_run(log)
    changed = publish("agent", agent_flow(["test.record"], system="Be brief."))

    mixed = forking.fork_run(origin.pk, "agent", changed.active_version.number, calls="recorded-then-live")
    assert wait_finished(mixed).status == "succeeded"
    assert len(llm.requests) == 4, "both turns were asked live"
    assert [r.json["messages"][0]["content"] for r in llm.requests[2:]] == ["Be brief."] * 2
    outcomes = list(RecordedCall.objects.filter(run=mixed).order_by("id").values_list("kind", "outcome"))
    assert outcomes == [("llm", "live"), ("tool", "replayed"), ("llm", "live")]
    assert len(tool_log(log)) == 1, "the identical tool call was replayed"

    strict = forking.fork_run(origin.pk, "agent", changed.active_version.number, calls="recorded")
    assert wait_finished(strict).status == "failed"
    assert len(llm.requests) == 4, "recorded mode sent nothing"
    error = NodeRun.objects.get(run=strict, node_id="agent").error
    assert "recorded mode" in error and f"run {origin.pk} made no llm call" in error
    missed = RecordedCall.objects.get(run=strict, outcome="missing")
    assert missed.request_hash[:12] in error
    assert "differs at $.messages[0], $.messages[1]" in error, error


class Counting(BaseHTTPRequestHandler):
    """Answer every GET with the path it asked for, counting the requests on the server."""

    def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
        self.server.seen.append(self.path)  # type: ignore[attr-defined]  # set on the server below
        body = json.dumps({"path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Counting)
    server.seen = []  # type: ignore[attr-defined]  # the requests served
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


def fetch_flow(url: str) -> dict[str, Any]:
    return {
        "nodes": [
            {"id": "fetch", "handler": "http.request", "config": {"url": url}},
            {"id": "after", "handler": "core.echo"},
        ],
        "edges": [{"source": "fetch", "target": "after"}],
    }


@pytest.mark.parametrize("replay_runtime", ["100", "0"], indirect=True, ids=["slots", "no-slots"])
def test_an_http_request_is_replayed_by_method_url_and_body_and_a_changed_url_is_named(
    replay_runtime: Runtime, http_server: ThreadingHTTPServer
) -> None:
    base = f"http://127.0.0.1:{http_server.server_address[1]}"
    origin, _ = runs.start_run(publish("fetching", fetch_flow(base + "/users/{input.user}")), {"user": "u7"})
    assert wait_finished(origin).status == "succeeded"
    assert http_server.seen == ["/users/u7"]  # type: ignore[attr-defined]

    fork = wait_finished(forking.fork_run(origin.pk, "fetch", calls="recorded"))
    assert fork.status == "succeeded" and outputs(fork) == outputs(origin)
    assert http_server.seen == ["/users/u7"], "the server got no second request"  # type: ignore[attr-defined]
    assert RecordedCall.objects.get(run=fork).outcome == "replayed"

    moved = publish("fetching", fetch_flow(base + "/people/{input.user}"))
    strict = forking.fork_run(origin.pk, "fetch", moved.active_version.number, calls="recorded")
    assert wait_finished(strict).status == "failed"
    error = NodeRun.objects.get(run=strict, node_id="fetch").error
    assert "made no http call" in error and "differs at $.url" in error, error
    assert len(http_server.seen) == 1  # type: ignore[attr-defined]


@pytest.mark.parametrize("replay_runtime", ["100", "0"], indirect=True, ids=["slots", "no-slots"])
def test_an_llm_chat_maps_items_are_recorded_under_the_map_node_and_a_recorded_fork_replays_each(
    replay_runtime: Runtime, llm: FakeLLMServer
) -> None:
    llm.reply = None  # the fake's default: `echo: <the user message>`
    each = node("each", "llm.chat", map="input.documents", config={"prompt": "Summarise: {item.text}"})
    workflow = publish("summaries", {"nodes": [each], "edges": []})
    texts = ["alpha", "beta", "gamma"]
    run = wait_finished(runs.start_run(workflow, {"documents": [{"text": t} for t in texts]})[0])

    assert run.status == "succeeded", NodeRun.objects.get(run=run, node_id="each").error
    asked = sorted(r.json["messages"][-1]["content"] for r in llm.requests)
    assert asked == [f"Summarise: {t}" for t in texts]
    assert [o["content"] for o in outputs(run)["each"]] == [f"echo: Summarise: {t}" for t in texts]
    map_node = NodeRun.objects.get(run=run, node_id="each")
    recorded = RecordedCall.objects.filter(run=run)
    assert sorted(r.step for r in recorded) == ["item 0", "item 1", "item 2"]
    assert {(r.node_run_id, r.attempt, r.outcome) for r in recorded} == {(map_node.pk, 1, "live")}

    fork = wait_finished(forking.fork_run(run.pk, "each", calls="recorded"))

    assert fork.status == "succeeded", NodeRun.objects.get(run=fork, node_id="each").error
    assert len(llm.requests) == len(texts), "the provider got no call"
    assert outputs(fork) == outputs(run)
    calls = LLMCall.objects.filter(run=fork)
    assert sorted((c.step, c.cost) for c in calls) == [(f"item {i} replayed", 0) for i in range(3)]
