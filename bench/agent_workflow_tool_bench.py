"""A workflow as an agent's tool, end to end: `.venv/bin/python bench/agent_workflow_tool_bench.py`.

Starts one scheduler and two RQ workers (real processes) against the waits bench's database
(recreated; see waits_bench.py), a fake provider in this process (tests/fakes/llm_server.py),
and runs, one at a time, an agent whose one turn asks for one tool, then answers:
- handler: the tool is `demo.calculator` (called inside the worker's attempt);
- workflow: the tool is a one-node workflow (`workflow_tools`): the attempt records the call,
  starts the child run and leaves its worker; the child's end queues it again.
Prints, from PostgreSQL's timestamps, each run's start to end and the tool step's own
duration (p50/p95): the difference is what a durable child run with a parked attempt costs.
Figures only; nothing here is asserted.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]
from waits_bench import log, prepare, spread, start_processes, stop_processes  # noqa: E402

SAMPLES = int(os.environ.get("SAMPLES") or 30)
LEAF = {"nodes": [{"id": "work", "handler": "core.noop"}]}


def agent(**config: Any) -> dict[str, Any]:
    return {"nodes": [{"id": "agent", "handler": "llm.agent", "config": {"prompt": "Go.", **config}}]}


def reply(request: dict[str, Any]) -> dict[str, Any]:
    """Turn 1 calls the one tool offered; turn 2 answers."""
    tool = request["tools"][0]["function"]["name"] if request.get("tools") else ""
    answered = any(m["role"] == "tool" for m in request["messages"])
    arguments = json.dumps({"a": 2, "b": 3, "op": "*"} if tool == "demo__calculator" else {})
    call = {"id": "c1", "type": "function", "function": {"name": tool, "arguments": arguments}}
    message = (
        {"role": "assistant", "content": "done"} if answered else {"role": "assistant", "tool_calls": [call]}
    )
    usage = {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
    return {"id": "x", "model": "fake-model", "choices": [{"index": 0, "message": message}], "usage": usage}


def main() -> None:
    env = prepare()
    from tests.fakes.llm_server import FakeLLMServer
    from workflows.runs import actions as runs
    from workflows.store.models import AgentStep, Run
    from workflows.versions import publish as versions

    with FakeLLMServer() as llm:
        llm.reply = reply
        env = {**env, "LLM_BASE_URL": llm.base_url, "LLM_MODEL": "fake-model"}
        procs = start_processes(
            {
                "tool-scheduler": ["runscheduler", "--name", "bench-s"],
                "tool-worker-1": ["rqworker", "-v", "0", "--name", "bench-w1", "default"],
                "tool-worker-2": ["rqworker", "-v", "0", "--name", "bench-w2", "default"],
            },
            env,
        )
        try:
            results = measure(runs, versions, Run, AgentStep)
            log(json.dumps(results))
            print(json.dumps(results, indent=2))
        finally:
            stop_processes(procs)


def measure(runs: Any, versions: Any, Run: Any, AgentStep: Any) -> dict[str, Any]:  # noqa: N803
    def publish(slug: str, definition: dict[str, Any]) -> Any:
        workflow = versions.create_workflow(slug, slug)
        versions.publish_version(versions.create_version(workflow, definition))
        workflow.refresh_from_db()
        return workflow

    def finished(run_id: int, timeout: float = 120) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = Run.objects.filter(pk=run_id, finished_at__isnull=False).first()
            if run is not None:
                return run
            time.sleep(0.01)
        raise SystemExit(f"run {run_id} did not finish within {timeout} s")

    publish("bench-leaf", LEAF)
    flows = {
        "handler": publish("bench-handler-tool", agent(tools=["demo.calculator"])),
        "workflow": publish("bench-workflow-tool", agent(workflow_tools=["bench-leaf"])),
    }
    time.sleep(3)  # the processes start
    took: dict[str, list[float]] = {label: [] for label in flows}
    step: dict[str, list[float]] = {label: [] for label in flows}
    for _ in range(SAMPLES):
        for label, workflow in flows.items():  # alternating, so load drifts hit both alike
            run = finished(runs.start_run(workflow, {})[0].pk)
            if run.status != "succeeded":
                raise SystemExit(f"run {run.pk} of {label} ended {run.status}")
            took[label].append((run.finished_at - run.created_at).total_seconds() * 1000)
            tool = AgentStep.objects.get(node_run__run=run, kind="tool")
            step[label].append(tool.duration_ms)
    return {
        **{f"{label}_run_ms": spread(xs) for label, xs in took.items()},
        **{f"{label}_tool_step_ms": spread(xs) for label, xs in step.items()},
    }


if __name__ == "__main__":
    main()
