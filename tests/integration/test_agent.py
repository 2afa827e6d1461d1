"""The agent node (`llm.agent`) end to end: real workers and scheduler, a fake provider on a
local socket whose replies are scripted per turn, tools that leave a line per real run."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from tests.fakes.llm_server import FakeLLMServer
from tests.integration import agent_tools  # noqa: F401  (registers the test tools here too)
from tests.integration.conftest import publish, two_workers_and_a_scheduler, wait_finished
from tests.integration.runtime import Runtime, wait_for
from workflows.handlers.demo import DEMO_AGENT
from workflows.llm.demo_server import script_reply
from workflows.runs import actions as runs
from workflows.store.models import AgentStep, DeadLetter, NodeRun, Run

MODULES = "workflows.handlers.builtin,workflows.handlers.demo,tests.integration.agent_tools"


def completion(content: str | None = None, *calls: tuple[str, Any]) -> dict[str, Any]:
    """A chat completion: text, or tool calls given as (function name, arguments)."""
    tool_calls = [
        {
            "id": f"call_{n}_{name}",
            "type": "function",
            "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
        }
        for n, (name, args) in enumerate(calls)
    ]
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-agent",
        "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
    }


def turn_of(request: dict[str, Any]) -> int:
    """Which turn a request is: one more than the assistant messages it carries."""
    return 1 + sum(1 for m in request["messages"] if m["role"] == "assistant")


def scripted(*replies: dict[str, Any] | Callable[[], dict[str, Any]]) -> Callable[[Any], Any]:
    """Reply to turn n with replies[n - 1] (called first if it is a function)."""

    def reply(request: Any) -> Any:
        answer = replies[min(turn_of(request), len(replies)) - 1]
        return answer() if callable(answer) else answer

    return reply


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


@pytest.fixture
def agent_runtime(transactional_db: Any, redis_clean: None, llm: FakeLLMServer) -> Iterator[Runtime]:
    """Two workers and a scheduler that know the test tools and use the fake provider."""
    yield from two_workers_and_a_scheduler(
        LLM_BASE_URL=llm.base_url, LLM_MODEL="fake-model", SWITCHYARD_HANDLER_MODULES=MODULES
    )


def agent_flow(tools: list[str], *, max_attempts: int = 1, **config: Any) -> dict[str, Any]:
    agent = {
        "id": "agent",
        "handler": "llm.agent",
        "config": {"prompt": "Do the task for {input.who}.", "tools": tools, **config},
        "retry": {"max_attempts": max_attempts, "backoff_seconds": 0.1},
    }
    return {
        "nodes": [agent, {"id": "after", "handler": "core.echo"}],
        "edges": [{"source": "agent", "target": "after"}],
    }


def tool_log(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def steps(run: Run) -> list[AgentStep]:
    return list(AgentStep.objects.filter(node_run__run=run).order_by("seq"))


def bodies(llm: FakeLLMServer) -> list[str]:
    return [json.dumps(r.json["messages"], sort_keys=True) for r in llm.requests]


def test_a_worker_killed_after_the_second_tool_call_repeats_no_finished_call(
    agent_runtime: Runtime, llm: FakeLLMServer, tmp_path: Path
) -> None:
    cut, released = threading.Event(), threading.Event()

    def third_turn() -> dict[str, Any]:
        if not cut.is_set():  # the first time: hold the answer until the worker is gone
            cut.set()
            released.wait(60)
        return completion("Both notes taken.")

    llm.reply = scripted(
        completion(None, ("test__record", {"note": "first"})),
        completion(None, ("test__record", {"note": "second"})),
        third_turn,
    )
    log = tmp_path / "tools.log"
    run, _ = runs.start_run(
        publish("agent", agent_flow(["test.record"], max_attempts=3)), {"who": "ana", "log": str(log)}
    )
    wait_for(cut.is_set, 60, "the third model turn to be asked")
    assert [(s.kind, s.status) for s in steps(run)] == [("turn", "ok"), ("tool", "ok")] * 2
    agent_runtime.kill(NodeRun.objects.get(run=run, node_id="agent").worker)
    released.set()

    assert wait_finished(run, 90).status == "succeeded"
    node = NodeRun.objects.get(run=run, node_id="agent")
    assert node.attempt == 2 and node.output["content"] == "Both notes taken."
    assert (node.output["turns"], node.output["tool_calls"]) == (3, 2)
    assert [line.split()[2] for line in tool_log(log)] == ["first", "second"], "each tool ran once"
    sent = bodies(llm)
    assert len(sent) == 4 and sent[2] == sent[3], "only the call cut by the kill was made again"
    assert len(set(sent[:3])) == 3, "no finished call was made twice"
    keys = [r.headers["idempotency-key"] for r in llm.requests]
    assert keys[2] == keys[3] and len(set(keys)) == 3
    recorded = steps(run)
    assert [(s.seq, s.kind, s.attempt) for s in recorded] == [
        (1, "turn", 1),
        (2, "tool", 1),
        (3, "turn", 1),
        (4, "tool", 1),
        (5, "turn", 2),
    ]
    assert recorded[1].arguments == {"note": "first"} and recorded[1].result == {"noted": "first"}


@pytest.fixture
def one_slot_connection_runtime(
    transactional_db: Any, redis_clean: None, llm: FakeLLMServer
) -> Iterator[Runtime]:
    """`agent_runtime` whose slots run their statements on one connection: the turn's record
    is certain to meet the connection that was cut (with several, it may take one the worker
    has not opened yet, and then nothing fails)."""
    yield from two_workers_and_a_scheduler(
        LLM_BASE_URL=llm.base_url,
        LLM_MODEL="fake-model",
        SWITCHYARD_HANDLER_MODULES=MODULES,
        SWITCHYARD_WORKER_SLOT_CONNECTIONS="1",
    )


def test_postgresql_dropping_every_connection_mid_loop_costs_the_agent_no_attempt(
    one_slot_connection_runtime: Runtime, llm: FakeLLMServer, tmp_path: Path
) -> None:
    """What a PostgreSQL restart does to the workers: every connection they hold is cut.

    The agent runs in a slot; its first tool call used a connection in a tool thread, its
    turns the slots' sync thread. All are cut while the second turn is being answered: the
    attempt waits for the store and goes on in the same attempt (one allowed): the run succeeds
    (`make chaos` saw agent nodes end failed, each retry dying on another thread's dead
    connection).
    """
    cut, released = threading.Event(), threading.Event()

    def second_turn() -> dict[str, Any]:
        cut.set()
        released.wait(60)
        return completion(None, ("test__record", {"note": "second"}))

    llm.reply = scripted(
        completion(None, ("test__record", {"note": "first"})),
        second_turn,
        completion("Both notes taken."),
    )
    log = tmp_path / "tools.log"
    run, _ = runs.start_run(publish("agent", agent_flow(["test.record"])), {"who": "eli", "log": str(log)})
    wait_for(cut.is_set, 60, "the second model turn to be asked")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        (terminated,) = cursor.fetchone()
    assert terminated >= 3, "the workers' and the scheduler's connections were cut"
    released.set()

    assert wait_finished(run, 90).status == "succeeded"
    node = NodeRun.objects.get(run=run, node_id="agent")
    assert node.attempt == 1 and node.output["content"] == "Both notes taken."
    assert [line.split()[2] for line in tool_log(log)] == ["first", "second"], "each tool ran once"
    # The second turn's answer came while its record could not be written: the log says so
    # (the store's error, not the model's), and the turn was asked again in the same attempt.
    recorded = steps(run)
    assert [(s.seq, s.kind, s.status, s.attempt) for s in recorded] == [
        (1, "turn", "ok", 1),
        (2, "tool", "ok", 1),
        (3, "turn", "failed", 1),
        (4, "turn", "ok", 1),
        (5, "tool", "ok", 1),
        (6, "turn", "ok", 1),
    ]
    assert recorded[2].error == "terminating connection due to administrator command"


def test_an_unknown_tool_and_bad_arguments_are_told_to_the_model(
    agent_runtime: Runtime, llm: FakeLLMServer, tmp_path: Path
) -> None:
    llm.reply = scripted(
        completion(
            None,
            ("shell__run", {"cmd": "rm -rf /"}),
            ("test__record", {"note": 5}),
            ("test__record", "{not json"),
            ("test__refuse", {"note": "order 9"}),
        ),
        completion("I could not do it."),
    )
    log = tmp_path / "tools.log"
    run, _ = runs.start_run(
        publish("agent", agent_flow(["test.record", "test.refuse"])), {"who": "bo", "log": str(log)}
    )
    assert wait_finished(run).status == "succeeded"
    told = [m["content"] for m in llm.requests[1].json["messages"] if m["role"] == "tool"]
    assert "unknown tool 'shell__run'" in told[0] and "test__record" in told[0]
    assert "arguments.note: 5 is not of type 'string'" in told[1]
    assert "not JSON" in told[2]
    assert told[3] == "error: nothing found for 'order 9'"
    assert [s.status for s in steps(run) if s.kind == "tool"] == ["error"] * 4
    assert tool_log(log) == []
    assert NodeRun.objects.get(run=run, node_id="agent").output["content"] == "I could not do it."


def test_max_steps_fails_the_node_saying_so_or_finishes_when_asked(
    agent_runtime: Runtime, llm: FakeLLMServer, tmp_path: Path
) -> None:
    llm.reply = scripted(completion(None, ("test__record", {"note": "again"})))
    inputs = {"who": "cy", "log": str(tmp_path / "tools.log")}
    run, _ = runs.start_run(publish("loops", agent_flow(["test.record"], max_steps=2)), inputs)
    assert wait_finished(run).status == "failed"
    letter = DeadLetter.objects.get(run=run)
    assert "reached max_steps (2 model turns)" in letter.error
    assert len(llm.requests) == 2 and len(tool_log(tmp_path / "tools.log")) == 2

    flow = agent_flow(["test.record"], max_steps=2, on_max_steps="finish")
    run, _ = runs.start_run(publish("loops-finish", flow), inputs)
    assert wait_finished(run).status == "succeeded"
    assert NodeRun.objects.get(run=run, node_id="agent").output["finish_reason"] == "max_steps"


def test_a_dead_letter_replay_continues_from_the_last_step(
    agent_runtime: Runtime, llm: FakeLLMServer, tmp_path: Path
) -> None:
    llm.reply = scripted(
        completion(None, ("test__record", {"note": "one"})),
        completion(None, ("test__blocked", {"note": "two"})),
        completion("Done after the replay."),
    )
    block, log = tmp_path / "block", tmp_path / "tools.log"
    block.touch()
    inputs = {"who": "di", "log": str(log), "block": str(block)}
    run, _ = runs.start_run(publish("replayed", agent_flow(["test.record", "test.blocked"])), inputs)
    assert wait_finished(run).status == "failed"
    letter = DeadLetter.objects.get(run=run)
    assert "tool test.blocked failed 2 time(s): RuntimeError: blocked by" in letter.error
    assert [(s.kind, s.status) for s in steps(run)] == [
        ("turn", "ok"),
        ("tool", "ok"),
        ("turn", "ok"),
        ("tool", "failed"),
    ]
    block.unlink()
    runs.replay_dead_letter(letter.pk)
    assert wait_finished(run).status == "succeeded"
    assert len(llm.requests) == 3 and len(set(bodies(llm))) == 3, "no model turn was asked twice"
    assert [line.split()[0] for line in tool_log(log)] == ["record", "blocked"]
    assert [(s.seq, s.kind, s.status, s.attempt) for s in steps(run)][4:] == [
        (5, "tool", "ok", 2),
        (6, "turn", "ok", 2),
    ]


def test_the_demo_agent_works_against_the_scripted_demo_provider(
    agent_runtime: Runtime, llm: FakeLLMServer
) -> None:
    llm.reply = script_reply  # what `make run` serves as the demo provider
    run, _ = runs.start_run(publish("demo-agent", DEMO_AGENT), {"order_id": "B-2002"})
    assert wait_finished(run).status == "succeeded"
    agent = NodeRun.objects.get(run=run, node_id="support_agent")
    tool = AgentStep.objects.get(node_run=agent, kind="tool")
    # The script fills order_id with what its pattern finds in the prompt: the order asked about.
    assert (tool.tool, tool.status, tool.arguments) == ("demo.lookup_order", "ok", {"order_id": "B-2002"})
    assert (agent.output["turns"], agent.output["tool_calls"]) == (2, 1)
    assert tool.result["order_id"] in agent.output["content"], "the answer quotes the tool's result"
