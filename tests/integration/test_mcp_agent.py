"""Agents calling MCP tools, with real workers and a scheduler as processes, the fake LLM
provider asking for the calls, and real MCP servers: the Python SDK server (streamable HTTP,
counting its calls) and the npm reference server (stdio)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.llm_server import FakeLLMServer
from tests.integration.conftest import free_port, publish, two_workers_and_a_scheduler, wait_finished
from tests.integration.mcp_servers import STDIO_COMMANDS, noted, python_server, stdio_env
from tests.integration.runtime import Runtime, wait_for
from tests.integration.test_agent import bodies, completion, scripted, steps
from workflows.forks import forking
from workflows.mcp import catalog, servers
from workflows.runs import actions as runs
from workflows.secrets import catalog as secrets
from workflows.store import traceids
from workflows.store.models import NodeRun, RecordedCall


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


@pytest.fixture
def calls_log(tmp_path: Path) -> Path:
    return tmp_path / "calls.log"


@pytest.fixture
def pytools_url(calls_log: Path) -> Iterator[str]:
    with python_server(calls_log) as url:
        yield url


@pytest.fixture
def mcp_runtime(
    transactional_db: Any, redis_clean: None, llm: FakeLLMServer, settings: Any
) -> Iterator[Runtime]:
    settings.SWITCHYARD = {**settings.SWITCHYARD, "MCP_STDIO_COMMANDS": STDIO_COMMANDS}
    yield from two_workers_and_a_scheduler(LLM_BASE_URL=llm.base_url, LLM_MODEL="fake-model", **stdio_env())


def register(name: str, **given: Any) -> None:
    row = catalog.refresh(servers.set_server(name, servers.ServerIn(**given)))
    assert row.tools_error == "", row.tools_error


def agent_flow(mcp_tools: list[dict[str, Any]], max_attempts: int = 1) -> dict[str, Any]:
    config = {"prompt": "Do the task for {input.who}.", "mcp_tools": mcp_tools, "max_steps": 5}
    node = {"id": "agent", "handler": "llm.agent", "config": config}
    node["retry"] = {"max_attempts": max_attempts, "backoff_seconds": 0.1}
    return {"nodes": [node], "edges": []}


def tool_steps(run: Any) -> list[Any]:
    return [s for s in steps(run) if s.kind == "tool"]


def test_an_agent_calls_mcp_tools_over_http_and_stdio_and_finishes(
    mcp_runtime: Runtime, llm: FakeLLMServer, pytools_url: str, calls_log: Path
) -> None:
    register("pytools", transport="http", url=pytools_url, timeout_seconds=20)
    register("everything", transport="stdio", command="everything", timeout_seconds=20)
    llm.reply = scripted(
        completion(
            None, ("mcp__pytools__note", {"note": "first"}), ("mcp__everything__echo", {"message": "hi"})
        ),
        completion("Noted and echoed."),
    )
    tools = [{"server": "pytools", "tools": ["note"]}, {"server": "everything", "tools": ["echo"]}]
    run, _ = runs.start_run(publish("mcp-agent", agent_flow(tools)), {"who": "ana"})

    assert wait_finished(run, 90).status == "succeeded"
    output = NodeRun.objects.get(run=run, node_id="agent").output
    assert (output["content"], output["tool_calls"]) == ("Noted and echoed.", 2)
    note, echo = tool_steps(run)
    assert (note.tool, note.status, note.result) == ("mcp:pytools/note", "ok", {"noted": "first"})
    assert (echo.tool, echo.status, echo.result) == ("mcp:everything/echo", "ok", "Echo: hi")
    offered = {t["function"]["name"] for t in llm.requests[0].json["tools"]}
    assert offered == {"mcp__pytools__note", "mcp__everything__echo"}
    told = [m["content"] for m in llm.requests[1].json["messages"] if m["role"] == "tool"]
    assert told == ['{"noted": "first"}', "Echo: hi"]
    (call,) = noted(calls_log)
    assert call["key"] == note.idempotency_key == f"{run.pk}:agent:tool:1.0"
    traceparent = traceids.traceparent_of(run.pk, "agent", 1)
    assert call["header_traceparent"] == call["meta_traceparent"] == traceparent


def test_a_worker_killed_mid_way_through_mcp_calls_repeats_no_completed_call(
    mcp_runtime: Runtime, llm: FakeLLMServer, pytools_url: str, calls_log: Path
) -> None:
    register("pytools", transport="http", url=pytools_url, timeout_seconds=20)
    cut, released = threading.Event(), threading.Event()

    def third_turn() -> dict[str, Any]:
        if not cut.is_set():  # the first time: hold the answer until the worker is gone
            cut.set()
            released.wait(60)
        return completion("Both notes taken.")

    llm.reply = scripted(
        completion(None, ("mcp__pytools__note", {"note": "first"})),
        completion(None, ("mcp__pytools__note", {"note": "second"})),
        third_turn,
    )
    flow = agent_flow([{"server": "pytools", "tools": ["note"]}], max_attempts=3)
    run, _ = runs.start_run(publish("mcp-kill", flow), {"who": "ana"})
    wait_for(cut.is_set, 60, "the third model turn to be asked")
    mcp_runtime.kill(NodeRun.objects.get(run=run, node_id="agent").worker)
    released.set()

    assert wait_finished(run, 90).status == "succeeded"
    node = NodeRun.objects.get(run=run, node_id="agent")
    assert node.attempt == 2 and (node.output["turns"], node.output["tool_calls"]) == (3, 2)
    calls = noted(calls_log)
    assert [c["note"] for c in calls] == ["first", "second"], (
        "each completed MCP call reached the server once"
    )
    assert len({c["key"] for c in calls}) == 2
    sent = bodies(llm)
    assert len(sent) == 4 and sent[2] == sent[3], "only the model turn cut by the kill was asked again"
    assert [(s.kind, s.attempt) for s in steps(run)] == [
        ("turn", 1),
        ("tool", 1),
        ("turn", 1),
        ("tool", 1),
        ("turn", 2),
    ]


def test_bad_servers_and_tools_are_bounded_errors_told_to_the_model(
    mcp_runtime: Runtime, llm: FakeLLMServer, pytools_url: str
) -> None:
    # 8 s, not 3: its `fail` tool answers at once, but under a loaded CI machine a session's
    # start and call once took over 3 s (a stop's rehearsal saw "no answer within 3 s" there).
    register("pytools", transport="http", url=pytools_url, timeout_seconds=8)
    register("gone", transport="http", url=pytools_url, timeout_seconds=3)
    register("big", transport="http", url=pytools_url, timeout_seconds=30)  # 50 MB take a while to make
    register("garbage", transport="stdio", command="pytools", timeout_seconds=30)  # listed while it spoke MCP
    servers.set_server(
        "gone", servers.ServerIn("http", url=f"http://127.0.0.1:{free_port()}/mcp", timeout_seconds=3)
    )
    catalog_row = servers.get_server("gone")
    catalog_row.tools = servers.get_server("pytools").tools  # the tools it listed before it went down
    catalog_row.save()
    garbage = servers.get_server("garbage")
    garbage.command, garbage.timeout_seconds = "garbage", 3  # now it answers with lines that are not JSON-RPC
    garbage.save()
    llm.reply = scripted(
        completion(
            None,
            ("mcp__pytools__slow", {"seconds": 30}),
            ("mcp__pytools__fail", {"reason": "no stock"}),
            ("mcp__big__huge", {"megabytes": 50}),
            ("mcp__gone__note", {"note": "x"}),
            ("mcp__garbage__note", {"note": "x"}),
        ),
        completion("Everything failed; reporting."),
    )
    tools = [
        {"server": "pytools", "tools": ["slow", "fail"]},
        {"server": "big", "tools": ["huge"]},
        {"server": "gone", "tools": ["note"]},
        {"server": "garbage", "tools": ["note"]},
    ]
    began = time.monotonic()
    run, _ = runs.start_run(publish("mcp-bad", agent_flow(tools)), {"who": "ana"})

    assert wait_finished(run, 120).status == "succeeded"
    assert time.monotonic() - began < 60, "no call outlived its server's timeout by much"
    errors = {s.tool: s.error for s in tool_steps(run)}
    assert all(s.status == "error" for s in tool_steps(run))
    assert errors["mcp:pytools/slow"] == "MCP server 'pytools', tool 'slow': no answer within 8 s"
    assert errors["mcp:pytools/fail"].startswith("Error executing tool fail")
    assert "exceeded the 1048576 byte limit" in errors["mcp:big/huge"]
    assert errors["mcp:gone/note"].startswith("MCP server 'gone', tool 'note': ConnectError")
    assert errors["mcp:garbage/note"] == "MCP server 'garbage', tool 'note': no answer within 3 s"
    told = [m["content"] for m in llm.requests[1].json["messages"] if m["role"] == "tool"]
    assert len(told) == 5 and all(t.startswith("error: ") and len(t) <= 2000 for t in told)


@pytest.fixture
def no_slots_runtime(
    transactional_db: Any, redis_clean: None, llm: FakeLLMServer, settings: Any
) -> Iterator[Runtime]:
    """Workers without slots: an agent's MCP calls run under asyncio.run, one at a time."""
    yield from two_workers_and_a_scheduler(
        LLM_BASE_URL=llm.base_url, LLM_MODEL="fake-model", SWITCHYARD_WORKER_SLOTS="0", **stdio_env()
    )


def test_a_recorded_fork_answers_mcp_calls_from_the_record_without_reaching_the_server(
    no_slots_runtime: Runtime, llm: FakeLLMServer, pytools_url: str, calls_log: Path
) -> None:
    register("pytools", transport="http", url=pytools_url, timeout_seconds=20)
    llm.reply = scripted(completion(None, ("mcp__pytools__note", {"note": "once"})), completion("Done."))
    flow = agent_flow([{"server": "pytools", "tools": ["note"]}])
    origin, _ = runs.start_run(publish("mcp-replay", flow), {"who": "ana"})
    assert wait_finished(origin, 90).status == "succeeded"
    assert [c["note"] for c in noted(calls_log)] == ["once"]

    fork = wait_finished(forking.fork_run(origin.pk, "agent", calls="recorded"), 90)

    assert fork.status == "succeeded"
    assert [c["note"] for c in noted(calls_log)] == ["once"], "the server got no second call"
    assert len(llm.requests) == 2, "the provider got no call either"
    (step,) = tool_steps(fork)
    assert (step.tool, step.result) == ("mcp:pytools/note", {"noted": "once"})
    replayed = RecordedCall.objects.filter(run=fork, kind="tool").values_list("outcome", "step")
    assert list(replayed) == [("replayed", "tool mcp:pytools/note")]


def test_a_secret_sent_as_a_header_never_reaches_the_step_or_the_record(
    mcp_runtime: Runtime, llm: FakeLLMServer, pytools_url: str
) -> None:
    secrets.set_secret("TOOL_TOKEN", "tok-4471-never-shown")
    register(
        "pytools",
        transport="http",
        url=pytools_url,
        headers={"X-Token": "{secret.TOOL_TOKEN}"},
        timeout_seconds=20,
    )
    llm.reply = scripted(completion(None, ("mcp__pytools__whoami", {})), completion("Known."))
    run, _ = runs.start_run(
        publish("mcp-secret", agent_flow([{"server": "pytools", "tools": ["whoami"]}])), {"who": "ana"}
    )

    assert wait_finished(run, 90).status == "succeeded"
    (step,) = tool_steps(run)
    assert step.result == {"token": "[secret:TOOL_TOKEN]"}, (
        "the server got the value; the step keeps its name"
    )
    recorded = RecordedCall.objects.get(run=run, kind="tool")
    assert recorded.response == {"result": {"token": "[secret:TOOL_TOKEN]"}}
    assert "tok-4471" not in llm.requests[1].body.decode()
