#!/usr/bin/env python3
"""An MCP tool call's overhead in an agent: `.venv/bin/python bench/mcp_bench.py [--calls 30 --reps 5]`.

Per call, against the same real servers (the Python SDK server in tests/fakes over streamable
HTTP, its `note` tool; the npm reference server over stdio, its `echo` tool):
- switchyard: an agent's tool step as a worker makes it (`workflows.agents.loop.call_tool` on
  an attempt in `running`): the replay lookup, the server's connection (secrets, traceparent),
  the call with the SDK (its own session: initialize, call, close), the answer recorded for
  replay (RecordedCall) and the step recorded (AgentStep);
- direct, a session per call: the same SDK code (`workflows.mcp.client.call_tool`), nothing
  recorded: what the step costs beyond reaching the server as Switchyard does;
- direct, one session: one SDK session for all the calls, as a long-lived client would hold it:
  what a session per call costs.
Alternating repetitions, medians. Servers: the embedded ones in .data/bench-mcp (or
DATABASE_URL/REDIS_URL), database `switchyard_mcpbench` recreated. Figures only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import waits_bench  # noqa: E402  (its server and database set-up, under our own names)

waits_bench.DATA = REPO / ".data" / "bench-mcp"
waits_bench.DB_NAME = "switchyard_mcpbench"
waits_bench.REDIS_DB = 6


def median_ms(samples: list[float], calls: int) -> float:
    return statistics.median(samples) / calls * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    db_url, redis_url = waits_bench.service_urls()
    waits_bench.recreate_database(db_url)
    stdio = {
        "everything": [
            "node",
            str(REPO / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"),
            "stdio",
        ]
    }
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "REDIS_URL": redis_url,
        "DJANGO_SETTINGS_MODULE": "controlplane.settings",
        "SWITCHYARD_MCP_STDIO_COMMANDS": json.dumps(stdio),
        "LLM_BASE_URL": "http://127.0.0.1:9/v1",  # resolved by the loop, never called
    }
    os.environ.update(env)
    subprocess.run(
        [str(REPO / ".venv/bin/python"), "manage.py", "migrate", "-v", "0"], cwd=REPO, env=env, check=True
    )
    import logging

    import django

    django.setup()
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    logging.getLogger("mcp").setLevel(logging.WARNING)

    from tests.integration.mcp_servers import python_server
    from workflows import handlers
    from workflows.agents import loop as agentloop
    from workflows.core import agent as core
    from workflows.mcp import catalog, client, servers
    from workflows.runs import actions as runs
    from workflows.store.models import NodeRun
    from workflows.versions import publish as versions

    with python_server(Path("/tmp/mcp-bench-calls.log")) as url:
        servers.set_server("pytools", servers.ServerIn("http", url=url, timeout_seconds=30))
        servers.set_server("everything", servers.ServerIn("stdio", command="everything", timeout_seconds=30))
        for name in ("pytools", "everything"):
            assert catalog.refresh(servers.get_server(name)).tools_error == ""
        cases = [
            ("pytools", "note", lambda n: {"note": f"n{n}"}),
            ("everything", "echo", lambda n: {"message": f"m{n}"}),
        ]
        mcp_tools = [{"server": s, "tools": [t]} for s, t, _ in cases]
        config = {"prompt": "Call the tools.", "mcp_tools": mcp_tools, "max_steps": 100}
        definition = {
            "nodes": [{"id": "agent", "handler": "llm.agent", "config": config, "timeout_seconds": 3600}]
        }
        workflow = versions.create_workflow("mcp-bench", "MCP bench")
        versions.publish_version(versions.create_version(workflow, definition))
        workflow.refresh_from_db()

        def switchyard_once(server: str, tool: str, arguments: Callable[[int], dict[str, Any]]) -> float:
            run, _ = runs.start_run(workflow, {})
            row = NodeRun.objects.get(run=run, node_id="agent")
            NodeRun.objects.filter(pk=row.pk).update(status="running", attempt=1)
            ctx = handlers.NodeContext(
                run.pk, "agent", 1, f"{run.pk}:agent:1", {}, {}, config, time.monotonic() + 3600, row.pk
            )
            loop = agentloop.start_loop(ctx)
            name = core.mcp_function_name(server, tool)
            began = time.perf_counter()
            for n in range(args.calls):
                move = core.CallTool(core.Call(f"c{n}", name, json.dumps(arguments(n))), 0, n)
                step = agentloop.call_tool(loop, move)
                assert step.status == core.OK, step
            return time.perf_counter() - began

        def direct_once(server: str, tool: str, arguments: Callable[[int], dict[str, Any]]) -> float:
            conn = servers.connection(servers.get_server(server))
            began = time.perf_counter()
            for n in range(args.calls):
                asyncio.run(client.call_tool(conn, tool, arguments(n), timeout_seconds=30, max_bytes=1 << 20))
            return time.perf_counter() - began

        def session_once(server: str, tool: str, arguments: Callable[[int], dict[str, Any]]) -> float:
            conn = servers.connection(servers.get_server(server))

            async def calls() -> float:
                async with client.session(conn) as opened:
                    began = time.perf_counter()
                    for n in range(args.calls):
                        await opened.call_tool(tool, arguments(n))
                    return time.perf_counter() - began

            return asyncio.run(calls())

        print(f"calls per repetition: {args.calls}, repetitions: {args.reps}, medians, ms per call")
        print(
            "| server (transport) | Switchyard step | direct, session per call | direct, one session | step overhead |"
        )
        print("|---|---|---|---|---|")
        for server, tool, arguments in cases:
            switchyard_once(server, tool, arguments), direct_once(server, tool, arguments)  # warm-up
            ours, direct, session = [], [], []
            for _ in range(args.reps):
                ours.append(switchyard_once(server, tool, arguments))
                direct.append(direct_once(server, tool, arguments))
                session.append(session_once(server, tool, arguments))
            a, d, s = (median_ms(x, args.calls) for x in (ours, direct, session))
            transport = servers.get_server(server).transport
            print(
                f"| {server} `{tool}` ({transport}) | {a:.1f} | {d:.1f} | {s:.2f} | {a - d:+.1f} ({(a / d - 1) * 100:+.0f} %) |"
            )


if __name__ == "__main__":
    main()
