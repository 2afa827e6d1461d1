#!/usr/bin/env python3
"""A fleet of agents on slots: N `llm.agent` runs of T turns each, T seconds a turn (issue 23).

    .venv/bin/python bench/agent_fleet_bench.py                            # 10,000 runs, 500 slots a worker
    .venv/bin/python bench/agent_fleet_bench.py --runs 1000 --slots 100
    .venv/bin/python bench/agent_fleet_bench.py --runs 3000 --slots 250 --turn-seconds 2 --turns 3

Runs 2 RQ workers and a scheduler as `make run` does (separate processes), on
bench/dashboard_bench.py's embedded servers (database recreated), against a scripted
OpenAI-compatible provider in processes of its own (`--provider-procs`, an asyncio server
each on one port, SO_REUSEPORT): every answer is held `--turn-seconds`, then streamed at once
(server-sent chunks, one body with its length, keep-alive). Turns 1..T-1 ask for the
`demo.calculator` tool, turn T answers `done <who>`, so each run takes exactly T model turns
and T-1 tool calls. The runs are started in bulk (`runs.start_runs`, 1,000 a statement).

Prints the wall time from the first start to the last run's end (its `finished_at`: the poll's
period does not pad it), the ideal (runs x turns x
turn seconds / all slots), their ratio, the runs correct (checked in PostgreSQL: succeeded,
the expected answer, exactly T recorded turns and T-1 tool steps), the workers' peak RSS,
CPU seconds per process group, LLM calls/s, where a run's time went (p50 and p95 of the wait
for a first turn, a turn, a tool step, the gaps between steps, the last step to the run's
end) and the load average before and after. Figures
only: nothing is asserted.

`--count-statements` also counts the SQL statements and Redis commands per run: PostgreSQL
logs every statement of the bench's database (`log_statement = all`, which costs PostgreSQL
CPU: time a sitting without it), and Redis's command counters are reset at the start. The
statements are grouped by their first words, the most frequent printed; the bench's own
polls (one a second) are among them.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import re
import socket
import sys
import time
from pathlib import Path
from typing import Any

import harness
import psutil
from dashboard_bench import REPO, Bench

sys.path.insert(0, str(REPO))

TOOL = "demo.calculator"


# --- the provider (its own processes) -------------------------------------------------------


def scripted_answer(request: dict[str, Any], turns: int) -> dict[str, Any]:
    """Turn n < turns: call the calculator; turn `turns`: answer `done <who>`."""
    messages = request.get("messages") or []
    turn = 1 + sum(1 for m in messages if m.get("role") == "assistant")
    message: dict[str, Any]
    if turn < turns:
        arguments = json.dumps({"a": turn, "b": 2, "op": "*"})
        call = {
            "id": f"c{turn}",
            "type": "function",
            "function": {"name": "demo__calculator", "arguments": arguments},
        }
        message, finish = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
    else:
        who = next(str(m.get("content")) for m in messages if m.get("role") == "user").split()[-1]
        message, finish = {"role": "assistant", "content": f"done {who}"}, "stop"
    return {
        "id": f"chatcmpl-fleet-{turn}",
        "model": "fleet",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10 * turn, "completion_tokens": 4, "total_tokens": 10 * turn + 4},
    }


async def answer_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, args: Any) -> None:
    from workflows.llm.demo_server import completion_chunks

    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            length = next(
                (int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:")),
                0,
            )
            request = json.loads(await reader.readexactly(length)) if length else {}
            await asyncio.sleep(args.turn_seconds)
            answer = scripted_answer(request, args.turns)
            if request.get("stream"):
                body, kind = b"".join(completion_chunks(answer)), b"text/event-stream"
            else:
                body, kind = json.dumps(answer).encode(), b"application/json"
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: " + kind + b"\r\nContent-Length: "
                + str(len(body)).encode() + b"\r\n\r\n" + body
            )  # fmt: skip
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


def serve_provider(args: argparse.Namespace) -> None:
    """One provider process: an asyncio server on the shared port (SO_REUSEPORT)."""

    async def serve() -> None:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(("127.0.0.1", args.serve_provider))
        server = await asyncio.start_server(
            lambda r, w: answer_connection(r, w, args), sock=sock, backlog=4096, limit=2**20
        )
        async with server:
            await server.serve_forever()

    asyncio.run(serve())


# --- the bench ------------------------------------------------------------------------------


class FleetBench(Bench):
    """The dashboard bench's servers and database; workers, a scheduler and the provider run."""

    def start(self) -> None:
        python = str(harness.VENV_BIN / "python")
        self.env["SWITCHYARD_WORKER_SLOTS"] = str(self.args.slots)
        self.env["SWITCHYARD_WORKER_SLOT_CONNECTIONS"] = str(self.args.slot_connections)
        for i in (1, 2):
            cmd = [python, "manage.py", "rqworker", "--name", f"fleet-w{i}", "default", "agents"]
            self.procs.append(harness.spawn(cmd, f"worker-{i}", "workers", self.env, self.logdir))
        cmd = [python, "manage.py", "runscheduler", "--name", "fleet-s1"]
        self.procs.append(harness.spawn(cmd, "scheduler", "scheduler", self.env, self.logdir))
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.provider_port = probe.getsockname()[1]
        for i in range(self.args.provider_procs):
            cmd = [
                python, str(Path(__file__)), "--serve-provider", str(self.provider_port),
                "--turn-seconds", str(self.args.turn_seconds), "--turns", str(self.args.turns),
            ]  # fmt: skip
            self.procs.append(harness.spawn(cmd, f"provider-{i + 1}", "provider", self.env, self.logdir))
        wait_listening(self.provider_port)

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time (user + system, reaped children included) per process group so far."""
        groups: dict[str, float] = {}
        for p in self.procs:
            groups[p.group] = groups.get(p.group, 0.0) + harness._cpu_seconds(psutil.Process(p.popen.pid))
        groups["postgres"] = sum(harness._cpu_seconds(p) for p in harness.tree(postmaster_pid())())
        groups["client (this process)"] = harness._cpu_seconds(psutil.Process())
        return groups

    def worker_rss(self) -> int:
        return sum(harness._rss(p.popen.pid) for p in self.procs if p.group == "workers")


def wait_listening(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"the provider did not listen on {port}; see bench/results")


def postmaster_pid() -> int | None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW data_directory")
        data = cursor.fetchone()[0]
    try:
        return int(Path(data, "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError):
        return None


def postgres_log() -> Path:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW data_directory")
        return Path(cursor.fetchone()[0]).parent / "postgres.log"


def log_statements() -> None:
    """Have PostgreSQL log every statement of the bench's database (connections made after)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"ALTER DATABASE {connection.settings_dict['NAME']} SET log_statement = 'all'")


STATEMENT = re.compile(r"LOG:  (?:statement|execute [^:]*): (.*)")


def count_statements(log: Path, offset: int, runs: int) -> dict[str, Any]:
    """Statements logged since `offset`, per run, and the most frequent shapes."""
    shapes: collections.Counter[str] = collections.Counter()
    with open(log, "rb") as f:
        f.seek(offset)
        lines = f.read().decode("utf-8", "replace").splitlines()
    for i, line in enumerate(lines):
        if match := STATEMENT.search(line):
            text = match.group(1).strip() or next((x.strip() for x in lines[i + 1 : i + 3] if x.strip()), "")
            shapes[" ".join(text.split()[:6])[:90]] += 1
    total = sum(shapes.values())
    top = {shape: round(n / runs, 2) for shape, n in shapes.most_common(25)}
    return {"statements_per_run": round(total / runs, 2), "top_per_run": top}


def redis_commands(runs: int) -> dict[str, Any]:
    from workflows.runtime import bus

    stats = bus.client().info("commandstats")
    calls = {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}
    top = dict(sorted(((k, round(n / runs, 2)) for k, n in calls.items()), key=lambda kv: -kv[1])[:12])
    return {"redis_commands_per_run": round(sum(calls.values()) / runs, 2), "redis_top_per_run": top}


def agent_workflow(args: argparse.Namespace) -> Any:
    from workflows.versions import publish as versions

    config = {
        "prompt": "Compute for {input.who}",
        "tools": [TOOL],
        "max_steps": args.turns + 2,
        "timeout_seconds": 600,
    }
    node = {
        "id": "agent",
        "handler": "llm.agent",
        "config": config,
        "timeout_seconds": 3600,
        "queue": "agents",
    }
    workflow = versions.create_workflow("agent-fleet", "Agent fleet bench")
    versions.publish_version(versions.create_version(workflow, {"nodes": [node], "edges": []}))
    workflow.refresh_from_db()
    return workflow


def start_all(bench: FleetBench, workflow: Any, count: int) -> list[int]:
    from workflows.runs.actions import MAX_BATCH, StartItem

    ids: list[int] = []
    for first in range(0, count, MAX_BATCH):
        items = [StartItem({"who": f"u{n}"}) for n in range(first, min(count, first + MAX_BATCH))]
        ids += [run.pk for run, _ in bench.runs.start_runs(workflow, items)]
    return ids


def correct_runs(ids: list[int], turns: int) -> dict[str, int]:
    """Succeeded runs with the expected answer, exactly `turns` turns and `turns - 1` tool steps."""
    from django.db import connection

    from workflows.store.statements import AGENT_STEPS, NODES, RUNS

    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT count(*) FILTER (WHERE r.status = 'succeeded'),
                   count(*) FILTER (WHERE r.status = 'succeeded'
                       AND n.output->>'content' = 'done ' || (r.input->>'who')
                       AND s.turns = %(turns)s AND s.tools = %(turns)s - 1 AND s.bad = 0)
            FROM {RUNS} r
            JOIN {NODES} n ON n.run_id = r.id
            LEFT JOIN LATERAL (
                SELECT count(*) FILTER (WHERE kind = 'turn') AS turns,
                       count(*) FILTER (WHERE kind = 'tool') AS tools,
                       count(*) FILTER (WHERE status <> 'ok') AS bad
                FROM {AGENT_STEPS} WHERE node_run_id = n.id
            ) s ON true
            WHERE r.id = ANY(%(ids)s)
            """,
            {"ids": ids, "turns": turns},
        )
        succeeded, correct = cursor.fetchone()
    return {"succeeded": succeeded, "correct": correct}


def last_finish(ids: list[int]) -> float:
    """The epoch seconds of the last run's end, by PostgreSQL's clock (this machine's): the
    wall time then does not depend on how often the bench polls."""
    from django.db.models import Max

    from workflows.store.models import Run

    last = Run.objects.filter(pk__in=ids).aggregate(at=Max("finished_at"))["at"]
    return last.timestamp() if last else time.time()


def where_time_went(ids: list[int]) -> dict[str, list[float]]:
    """p50 and p95 (seconds) of each part of a run's life: waiting for its first turn (a free
    slot), a turn (asked to recorded), its LLM call alone (the provider holds each answer
    --turn-seconds), a tool step,
    the gap between one step's end and the next one's start, and from the last step's end
    to the run's end."""
    from django.db import connection

    from workflows.store.models import LLMCall
    from workflows.store.statements import AGENT_STEPS, NODES, RUNS, table

    LLM_CALLS = table(LLMCall)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH s AS (
                SELECT s.kind, s.seq, s.started_at, s.finished_at, r.created_at, r.finished_at AS run_end,
                       lag(s.finished_at) OVER (PARTITION BY s.node_run_id ORDER BY s.seq) AS before,
                       lead(s.seq) OVER (PARTITION BY s.node_run_id ORDER BY s.seq) AS after
                FROM {AGENT_STEPS} s JOIN {NODES} n ON n.id = s.node_run_id JOIN {RUNS} r ON r.id = n.run_id
                WHERE r.id = ANY(%(ids)s)
            ), parts AS (
                SELECT 'to first turn' AS part, extract(epoch FROM started_at - created_at) AS s FROM s WHERE before IS NULL
                UNION ALL SELECT 'turn', extract(epoch FROM finished_at - started_at) FROM s WHERE kind = 'turn'
                UNION ALL SELECT 'tool', extract(epoch FROM finished_at - started_at) FROM s WHERE kind = 'tool'
                UNION ALL SELECT 'between steps', extract(epoch FROM started_at - before) FROM s WHERE before IS NOT NULL
                UNION ALL SELECT 'last step to run end', extract(epoch FROM run_end - finished_at) FROM s WHERE after IS NULL
                UNION ALL SELECT 'llm call', c.latency_ms / 1000.0 FROM {LLM_CALLS} c WHERE c.run_id = ANY(%(ids)s)
            )
            SELECT part, percentile_cont(0.5) WITHIN GROUP (ORDER BY s), percentile_cont(0.95) WITHIN GROUP (ORDER BY s)
            FROM parts GROUP BY part
            """,
            {"ids": ids},
        )
        return {part: [round(p50, 3), round(p95, 3)] for part, p50, p95 in cursor.fetchall()}


def unfinished(ids: list[int]) -> int:
    from workflows.store.models import Run

    return Run.objects.filter(pk__in=ids).exclude(status__in=["succeeded", "failed", "cancelled"]).count()


def run_fleet(bench: FleetBench, args: argparse.Namespace) -> dict[str, Any]:
    from workflows.store.models import LLMCall, LLMProvider

    base_url = f"http://127.0.0.1:{bench.provider_port}/v1"
    LLMProvider.objects.create(name="fleet", base_url=base_url, default_model="fleet", is_default=True)
    workflow = agent_workflow(args)
    time.sleep(3)  # the workers and the scheduler connect
    if args.count_statements:
        from workflows.runtime import bus

        log = postgres_log()
        offset = log.stat().st_size
        bus.client().config_resetstat()
    load_before = os.getloadavg()
    cpu_before = bench.cpu_seconds()
    began, began_at = time.perf_counter(), time.time()
    ids = start_all(bench, workflow, args.runs)
    submitted = time.perf_counter() - began
    ideal = args.runs * args.turns * args.turn_seconds / (2 * args.slots)
    peak_rss, deadline = 0, time.monotonic() + args.give_up_after
    while (left := unfinished(ids)) > 0 and time.monotonic() < deadline:
        peak_rss = max(peak_rss, bench.worker_rss())
        time.sleep(max(1.0, args.runs / 2000))  # the poll reads every id: 10,000 a second cost 50 CPU s
    wall = (last_finish(ids) - began_at) if not left else time.perf_counter() - began
    load_after = os.getloadavg()
    cpu = {g: round(s - cpu_before.get(g, 0.0), 1) for g, s in bench.cpu_seconds().items()}
    calls = LLMCall.objects.filter(run_id__in=ids).count()
    counted = (
        {**count_statements(log, offset, args.runs), **redis_commands(args.runs)}
        if args.count_statements
        else {}
    )
    return {
        "runs": args.runs,
        "unfinished": left,  # given up after --give-up-after seconds: the figures are up to then
        "slots_per_worker": args.slots,
        "slot_connections": args.slot_connections,
        **correct_runs(ids, args.turns),
        "wall_s": round(wall, 1),
        "ideal_s": round(ideal, 1),
        "ratio": round(wall / ideal, 2),
        "submit_s": round(submitted, 1),
        "p50_p95_s": where_time_went(ids),
        "llm_calls": calls,
        "llm_calls_per_s": round(calls / wall),
        "worker_rss_mb_peak_total": round(peak_rss / 2**20),
        "cpu_s": cpu,
        "load_before": [round(x, 1) for x in load_before],
        "load_after": [round(x, 1) for x in load_after],
        **counted,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--slots", type=int, default=500, help="slots per worker (2 workers)")
    parser.add_argument("--turn-seconds", type=float, default=2.0)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument(
        "--slot-connections", type=int, default=8, help="per worker (runtime/slots.py; 8 as in make run)"
    )
    parser.add_argument("--provider-procs", type=int, default=1)
    parser.add_argument("--give-up-after", type=float, default=3600, help="seconds; then print what finished")
    parser.add_argument(
        "--count-statements",
        action="store_true",
        help="log and count SQL statements and Redis commands per run",
    )
    parser.add_argument("--serve-provider", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_provider:
        serve_provider(args)
        return
    bench = FleetBench(args)
    bench.prepare()
    if args.count_statements:
        log_statements()
    try:
        bench.start()
        print(json.dumps(run_fleet(bench, args)), flush=True)
    finally:
        harness.stop(bench.procs)


if __name__ == "__main__":
    main()
