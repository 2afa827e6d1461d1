#!/usr/bin/env python3
"""An agent loop's overhead per step: `.venv/bin/python bench/agent_bench.py [--steps 20 --reps 7]`.

One step is a model turn that asks for a tool, plus that tool call. The same fake provider
(tests/fakes/llm_server.py, on a local socket, in this process) answers both sides:
- agent: `runtime.agent.run_agent`, as a worker runs it, on a node row in `running`: every
  turn and tool call recorded (AgentStep) and every model call priced (LLMCall);
- direct: the same calls made from Python: `llm.client.complete` with the same growing
  messages and tools, streamed as the agent's turns are, and the tool's function, nothing
  recorded (the agent's path also writes each turn's stream to Redis).
The difference per step is what durability costs. Alternating repetitions, medians; also
the PostgreSQL statements per step. Servers: the embedded ones in .data/bench-agent (or
DATABASE_URL/REDIS_URL), database `switchyard_agentbench` recreated. Figures only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import waits_bench  # noqa: E402  (its server and database set-up, under our own names)

waits_bench.DATA = REPO / ".data" / "bench-agent"
waits_bench.DB_NAME = "switchyard_agentbench"
waits_bench.REDIS_DB = 5

TOOL = "demo.calculator"


def reply_for(steps: int) -> Any:
    """Turns 1..steps ask for the calculator; the next one answers."""

    def reply(request: dict[str, Any]) -> dict[str, Any]:
        turn = 1 + sum(1 for m in request["messages"] if m["role"] == "assistant")
        message: dict[str, Any] = {"role": "assistant", "content": f"answer after {turn - 1} tool calls"}
        if turn <= steps:
            arguments = json.dumps({"a": turn, "b": 2, "op": "*"})
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{turn}",
                        "type": "function",
                        "function": {"name": "demo__calculator", "arguments": arguments},
                    }
                ],
            }
        usage = {"prompt_tokens": 20 * turn, "completion_tokens": 8, "total_tokens": 20 * turn + 8}
        return {
            "id": "x",
            "model": "bench-model",
            "choices": [{"index": 0, "message": message}],
            "usage": usage,
        }

    return reply


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    db_url, redis_url = waits_bench.service_urls()
    waits_bench.recreate_database(db_url)
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "REDIS_URL": redis_url,
        "DJANGO_SETTINGS_MODULE": "controlplane.settings",
    }
    os.environ.update(env)
    subprocess.run(
        [str(REPO / ".venv/bin/python"), "manage.py", "migrate", "-v", "0"], cwd=REPO, env=env, check=True
    )
    import django

    django.setup()
    from django.db import connection

    from tests.fakes.llm_server import FakeLLMServer
    from workflows import handlers
    from workflows.agents.loop import run_agent
    from workflows.core import agent as core
    from workflows.llm import client, providers
    from workflows.runs import actions as runs
    from workflows.store.graphs import load_graph
    from workflows.store.models import NodeRun
    from workflows.versions import publish as versions

    statements = [0]

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        statements[0] += 1
        return execute(sql, params, many, context)

    with FakeLLMServer(reply=reply_for(args.steps)) as fake:
        os.environ["LLM_BASE_URL"] = fake.base_url
        from django.conf import settings

        settings.SWITCHYARD = {
            **settings.SWITCHYARD,
            "LLM_BASE_URL": fake.base_url,
            "LLM_MODEL": "bench-model",
        }
        config = {"prompt": "Multiply, step by step.", "tools": [TOOL], "max_steps": args.steps + 1}
        definition = {
            "nodes": [{"id": "agent", "handler": "llm.agent", "config": config, "timeout_seconds": 600}]
        }
        workflow = versions.create_workflow("agent-bench", "Agent bench")
        versions.publish_version(versions.create_version(workflow, definition))
        workflow.refresh_from_db()
        node = load_graph(workflow.active_version_id).nodes["agent"]
        endpoint = providers.resolve(None, None)
        tool = handlers.get_handler(TOOL)
        spec = core.tool_spec(TOOL, tool.doc, tool.config_schema or {})

        def context(run_id: int, noderun_id: int, key: str, conf: dict[str, Any]) -> handlers.NodeContext:
            return handlers.NodeContext(
                run_id, "agent", 1, key, {}, {}, conf, time.monotonic() + 600, noderun_id
            )

        def agent_once() -> tuple[float, int]:
            run, _ = runs.start_run(workflow, {})
            row = NodeRun.objects.get(run=run, node_id="agent")
            NodeRun.objects.filter(pk=row.pk).update(status="running", attempt=1)
            statements[0] = 0
            began = time.perf_counter()
            with connection.execute_wrapper(count):
                output = run_agent(node, context(run.pk, row.pk, f"{run.pk}:agent:1", config))
            assert output["tool_calls"] == args.steps, output
            return time.perf_counter() - began, statements[0]

        def direct_once() -> float:
            messages: list[dict[str, Any]] = core.opening_messages("", config["prompt"])
            began = time.perf_counter()
            for n in range(args.steps + 1):
                answer = client.complete(
                    endpoint,
                    messages,
                    tools=[spec],
                    idempotency_key=f"d:{n}",
                    timeout_seconds=30,
                    where="bench",
                    on_delta=lambda text: None,  # streamed, as the agent's turns are
                )
                if not answer.tool_calls:
                    break
                call = answer.tool_calls[0]
                arguments = (
                    call["arguments"]
                    if isinstance(call["arguments"], dict)
                    else json.loads(call["arguments"])
                )
                result = tool.func(context(0, 0, f"d:tool:{n}", arguments))
                messages.append(
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": call["id"],
                                "type": "function",
                                "function": {"name": call["name"], "arguments": json.dumps(arguments)},
                            }
                        ],
                    }  # fmt: skip
                )
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)})
            return time.perf_counter() - began

        agent_once(), direct_once()  # warm-up: connections, imports, plans
        agent_s, direct_s, queries = [], [], []
        for _ in range(args.reps):
            seconds, n = agent_once()
            agent_s.append(seconds)
            queries.append(n)
            direct_s.append(direct_once())
    per = args.steps
    a, d = statistics.median(agent_s) / per * 1000, statistics.median(direct_s) / per * 1000
    print(f"steps per loop: {per} (+ the final answer), repetitions: {args.reps}, medians")
    print(f"agent (recorded):  {a:7.2f} ms per step   ({statistics.median(agent_s) * 1000:.0f} ms per loop)")
    print(f"direct (Python):   {d:7.2f} ms per step   ({statistics.median(direct_s) * 1000:.0f} ms per loop)")
    print(f"overhead:          {a - d:7.2f} ms per step ({(a / d - 1) * 100:.0f} %)")
    print(f"PostgreSQL statements per step: {statistics.median(queries) / per:.1f}")


if __name__ == "__main__":
    main()
