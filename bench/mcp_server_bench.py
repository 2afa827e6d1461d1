"""An MCP tool call beside the REST API: `.venv/bin/python bench/mcp_server_bench.py`.

Starts one scheduler, two RQ workers and Daphne (real processes, `python -m
controlplane.webserver` as `make run` does) against the waits bench's database (recreated; see
waits_bench.py), publishes the demo workflow `demo-profile` (4 nodes), and times, one after
the other and alternating so that load drifts hit all alike, a run of it started and waited on:
- mcp_call: `tools/call demo-profile` on an initialized session of the official MCP client
  SDK (the server waits on the run and answers its output);
- mcp_session_and_call: the same with a new session each time (initialize, then the call: a
  client that connects per call);
- rest_start_and_poll: POST /api/v1/workflows/demo-profile/runs, then GET /api/v1/runs/{id}
  every 20 ms until it has ended (a tight REST client; one kept-alive httpx connection).
Prints p50 and p95 in ms per way. The per-key rate limit is off (SWITCHYARD_API_RATE_LIMIT_PER_MINUTE=0):
the REST poller alone would pass 600 requests a minute. Figures only; nothing is asserted.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]
import harness  # noqa: E402
from waits_bench import BIN, DATA, log, prepare, spread, start_processes, stop_processes  # noqa: E402

SAMPLES = int(os.environ.get("SAMPLES") or 30)
POLL_SECONDS = 0.02
SLUG = "demo-profile"


def start_daphne(env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    with open(DATA / "mcp-daphne.log", "ab") as out:
        argv = [str(BIN / "python"), "-m", "controlplane.webserver", "-b", "127.0.0.1", "-p", str(port)]
        return subprocess.Popen(
            [*argv, "controlplane.asgi:application"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def setup() -> str:
    """Publish the demo workflow; return an API key (read, run) of an admin."""
    from django.contrib.auth import get_user_model

    from workflows.handlers.demo import DEMO_WORKFLOWS
    from workflows.integrations import keys
    from workflows.versions import publish as versions

    title, definition = DEMO_WORKFLOWS[SLUG]
    workflow = versions.create_workflow(SLUG, title)
    versions.publish_version(versions.create_version(workflow, definition))
    owner = get_user_model().objects.create_superuser("bench-admin", password="x")
    return keys.create_key(owner, "mcp bench", ["read", "run"])[1]


async def measure(base: str, token: str) -> dict[str, Any]:
    import httpx

    from tests.integration.mcp_client import connect

    took: dict[str, list[float]] = {"mcp_call": [], "mcp_session_and_call": [], "rest_start_and_poll": []}
    headers = {"Authorization": f"Bearer {token}"}
    async with connect(base, token) as session, httpx.AsyncClient(base_url=base, headers=headers) as rest:
        for n in range(SAMPLES + 3):  # the first three warm up
            t0 = time.perf_counter()
            result = await session.call_tool(SLUG, {"user_id": f"u-{n}"})
            t1 = time.perf_counter()
            async with connect(base, token) as fresh:
                again = await fresh.call_tool(SLUG, {"user_id": f"v-{n}"})
            t2 = time.perf_counter()
            await rest_run(rest, {"user_id": f"w-{n}"})
            t3 = time.perf_counter()
            for label, answered in (("mcp_call", result), ("mcp_session_and_call", again)):
                if answered.is_error or answered.structured_content["status"] != "succeeded":
                    raise SystemExit(f"{label}: {answered.content}")
            if n >= 3:
                took["mcp_call"].append((t1 - t0) * 1000)
                took["mcp_session_and_call"].append((t2 - t1) * 1000)
                took["rest_start_and_poll"].append((t3 - t2) * 1000)
    return {label: spread(xs) for label, xs in took.items()}


async def rest_run(rest: Any, run_input: dict[str, Any]) -> None:
    started = await rest.post(f"/api/v1/workflows/{SLUG}/runs", json={"input": run_input})
    started.raise_for_status()
    url = started.json()["url"]
    while True:
        run = (await rest.get(url)).json()
        if run["finished_at"] is not None:
            if run["status"] != "succeeded":
                raise SystemExit(f"REST run ended {run['status']}")
            return
        await asyncio.sleep(POLL_SECONDS)


def main() -> None:
    env = {**prepare(), "SWITCHYARD_API_RATE_LIMIT_PER_MINUTE": "0"}
    token = setup()
    port = harness.free_port()
    procs = start_processes(
        {
            "mcp-scheduler": ["runscheduler", "--name", "bench-s"],
            "mcp-worker-1": ["rqworker", "-v", "0", "--name", "bench-w1", "default"],
            "mcp-worker-2": ["rqworker", "-v", "0", "--name", "bench-w2", "default"],
        },
        env,
    )
    procs["mcp-daphne"] = start_daphne(env, port)
    try:
        harness.wait_listening(port)
        time.sleep(3)  # the workers and the scheduler start
        results = asyncio.run(measure(f"http://127.0.0.1:{port}", token))
        log(json.dumps(results))
        print(json.dumps(results, indent=2))
    finally:
        stop_processes(procs)


if __name__ == "__main__":
    main()
