#!/usr/bin/env python3
"""Run starts through the API beside a plain one-INSERT Django view, and a batch of 1,000.

    .venv/bin/python bench/start_bench.py            # servers of .data/bench-api, started (and stopped) if needed
    REQUESTS=4000 CONCURRENCY=16 BATCHES=5 .venv/bin/python bench/start_bench.py

Each through its own Daphne process on this machine, with the same settings and middleware:
- `POST /api/v1/workflows/bench-4/runs`: one start (key auth, scope and role check, the
  rate-limit counter in Redis, a fresh Idempotency-Key, a 4-node run written in one
  statement, its roots' job enqueued or, in a burst, the schedulers notified). No scheduler
  or worker runs: this is the start's cost, not the engine's.
- a plain Django view (csrf-exempt, no auth) parsing the JSON body and doing one INSERT:
  `bench.api_bench:application`, a URLconf of its own, so no production URL exists for it.
- `POST /api/v1/workflows/bench-4/runs:batch` with 1,000 items (each its own key): wall time
  as the client sees it, one request at a time, BATCHES times (first one as warm-up).
- both single paths again in this process through Django's test client (no Daphne, no
  network), alternating rounds: CPU ms per request of this process (the Python cost of the
  path; the servers' work is not in it) and the statements each sends. On a busy machine
  this is the steadier comparison; req/s through Daphne moves with the load.

Throughput: CONCURRENCY client threads with keep-alive connections, REQUESTS requests after
WARMUP; p50/p95 are per request as the client saw them, under that concurrency. Database
`switchyard_startbench` (dropped and recreated), Redis database 6 (flushed), on the servers
DATABASE_URL/REDIS_URL name or the embedded ones of .data/bench-api. Prints a table and
`uptime`, and writes .data/bench-api/start-results.json.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import api_bench  # noqa: E402
from bench.api_bench import BIN, DATA, daphne, load, log, stop, wait_up  # noqa: E402

DB_NAME = "switchyard_startbench"
REDIS_DB = 6
REQUESTS = api_bench.env_int("REQUESTS", 1000)
CONCURRENCY = api_bench.env_int("CONCURRENCY", 8)
WARMUP = api_bench.env_int("WARMUP", 200)
BATCHES = api_bench.env_int("BATCHES", 4)
ROUNDS = api_bench.env_int("ROUNDS", 4)
BATCH_SIZE = 1000


def service_urls() -> tuple[str, str, bool]:
    api_bench.DB_NAME, api_bench.REDIS_DB = DB_NAME, REDIS_DB  # read at call time there
    return api_bench.service_urls()


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(api: str, plain: str, token: str, pids: dict[str, int]) -> dict[str, dict[str, Any]]:
    """Both single paths through Daphne, alternating ROUNDS times; then the batches.

    Each round sends REQUESTS starts, then REQUESTS plain INSERTs, so a change of load on the
    machine reaches both; the ratio is taken per round and its median reported.
    """
    auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    tag = uuid.uuid4().hex[:8]

    def start(client: Any, n: int) -> Any:
        headers = {**auth, "Idempotency-Key": f"{tag}-{n}"}
        body = json.dumps({"input": {"n": n}})
        return client.post("/api/v1/workflows/bench-4/runs", content=body, headers=headers)

    def insert(client: Any, n: int) -> Any:
        return client.post("/plain/insert", content=json.dumps({"input": {"n": n}}), headers=auth)

    paths = (
        ("api: start one run", api, pids["api"], start, 201),
        ("plain: one INSERT", plain, pids["plain"], insert, 201),
    )
    for name, base, _, request, expect in paths:
        log(f"{name}: warm-up {WARMUP}")
        load(base, WARMUP, CONCURRENCY, request, expect)
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name, *_ in paths}
    for r in range(ROUNDS):
        for name, base, pid, request, expect in paths:
            log(f"round {r + 1}/{ROUNDS}, {name}: {REQUESTS} requests over {CONCURRENCY} connections")
            tag = uuid.uuid4().hex[:8]
            cpu = process_cpu(pid)
            figures = load(base, REQUESTS, CONCURRENCY, request, expect)
            figures["server_cpu_ms"] = (process_cpu(pid) - cpu) / REQUESTS * 1000
            rounds[name].append(figures)
    ratios = [s["rps"] / p["rps"] for s, p in zip(*rounds.values(), strict=True)]
    results: dict[str, dict[str, Any]] = {
        name: {key: api_bench.percentile([f[key] for f in rows], 50) for key in rows[0]}
        for name, rows in rounds.items()
    }
    results["api: start one run"]["ratios"] = ratios
    results["api: batch of 1,000 runs"] = measure_batches(api, auth)
    return results


def measure_batches(api: str, auth: dict[str, str]) -> dict[str, Any]:
    import httpx

    walls = []
    with httpx.Client(base_url=api, timeout=60) as client:
        for b in range(BATCHES):
            tag = uuid.uuid4().hex[:8]
            items = [{"input": {"n": n}, "idempotency_key": f"{tag}-{n}"} for n in range(BATCH_SIZE)]
            body = json.dumps({"items": items})
            started = time.perf_counter()
            response = client.post("/api/v1/workflows/bench-4/runs:batch", content=body, headers=auth)
            wall = time.perf_counter() - started
            if response.status_code != 200 or response.json()["created"] != BATCH_SIZE:
                raise SystemExit(f"batch {b}: {response.status_code} {response.text[:300]}")
            walls.append(wall * 1000)
    timed = walls[1:] or walls  # the first pays for the process's first statements
    return {
        "requests": len(timed),
        "rps": BATCH_SIZE * len(timed) / (sum(timed) / 1000),
        "p50": api_bench.percentile(timed, 50),
        "p95": api_bench.percentile(timed, 95),
        "errors": 0,
        "walls_ms": walls,
    }


def measure_in_process(token: str, rounds: int = 5, per_round: int = 100) -> dict[str, dict[str, Any]]:
    """CPU and wall time per request of both paths, through Django's test client in this process.

    The same request handling without Daphne and the network: this process's CPU time per
    request is the Python cost of each path (the servers' work is not in it), which a busy
    machine disturbs far less than requests per second. Rounds alternate the two paths.
    """
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext, override_settings

    client = Client(HTTP_HOST="127.0.0.1")
    auth = {"Authorization": f"Bearer {token}"}
    tag = uuid.uuid4().hex[:8]
    figures: dict[str, list[tuple[float, float]]] = {"api: start one run": [], "plain: one INSERT": []}

    def api(n: int) -> Any:
        headers = {**auth, "Idempotency-Key": f"{tag}-{n}"}
        return client.post(
            "/api/v1/workflows/bench-4/runs", {"input": {"n": n}}, "application/json", headers=headers
        )

    def plain(n: int) -> Any:
        with override_settings(ROOT_URLCONF="bench.api_bench"):
            return client.post("/plain/insert", {"input": {"n": n}}, "application/json")

    statements = {}
    for name, call in (("api: start one run", api), ("plain: one INSERT", plain)):
        call(10**6)  # warm
        with CaptureQueriesContext(connection) as queries:
            call(10**6 + 1)
        statements[name] = len(queries.captured_queries)
    for r in range(rounds):
        for name, call, status in (("api: start one run", api, 201), ("plain: one INSERT", plain, 201)):
            cpu0, wall0 = time.process_time(), time.perf_counter()
            for n in range(per_round):
                if call(r * per_round + n).status_code != status:
                    raise SystemExit(f"{name}: unexpected answer")
            figures[name].append(
                (
                    (time.process_time() - cpu0) / per_round * 1000,
                    (time.perf_counter() - wall0) / per_round * 1000,
                )
            )
    return {
        name: {
            "cpu_ms": api_bench.percentile([c for c, _ in rows], 50),
            "wall_ms": api_bench.percentile([w for _, w in rows], 50),
            "statements": statements[name],
        }
        for name, rows in figures.items()
    }


def report(results: dict[str, dict[str, Any]], load_avg: str) -> None:
    print(
        "\n| what | runs/s | p50 ms | p95 ms | Daphne CPU ms/request | errors |"
        f"   ({CONCURRENCY} connections; batch: one at a time)"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        if name == "in-process":
            continue
        cpu = f"{r['server_cpu_ms']:.2f}" if "server_cpu_ms" in r else "-"
        print(f"| {name} | {r['rps']:.0f} | {r['p50']:.2f} | {r['p95']:.2f} | {cpu} | {r['errors']} |")
    inproc = results["in-process"]
    print(
        "\n| in this process (test client), median of rounds | CPU ms/request | wall ms/request | SQL statements |"
    )
    print("|---|---:|---:|---:|")
    for name, r in inproc.items():
        print(f"| {name} | {r['cpu_ms']:.2f} | {r['wall_ms']:.2f} | {r['statements']} |")
    ratios = results["api: start one run"]["ratios"]
    batch = results["api: batch of 1,000 runs"]
    print(
        f"\nsingle start / plain INSERT, per round: {', '.join(f'{r:.2f}' for r in ratios)}; "
        f"median {api_bench.percentile(ratios, 50):.2f}x throughput (target >= 0.8x); "
        f"batch of 1,000: p50 {batch['p50']:.0f} ms (target < 1000 ms)\nuptime: {load_avg}"
    )


def main() -> None:
    DATA.mkdir(parents=True, exist_ok=True)
    db_url, redis_url, started = service_urls()
    try:
        bench(db_url, redis_url)
    finally:
        if started:
            log("stopping the embedded services")
            api_bench.load_services().down(DATA)


def bench(db_url: str, redis_url: str) -> None:
    api_bench.recreate_database(db_url)
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "REDIS_URL": redis_url,
        "DJANGO_SETTINGS_MODULE": "controlplane.settings",
        "SWITCHYARD_API_RATE_LIMIT_PER_MINUTE": "1000000000",  # on (its cost counts), out of reach
        "LOG_LEVEL": "WARNING",
        "DB_CONN_MAX_AGE": os.environ.get("DB_CONN_MAX_AGE", "0"),  # as api_bench.py says why
    }
    os.environ.update(env)
    subprocess.run([str(BIN / "python"), "manage.py", "migrate", "-v0"], cwd=REPO, env=env, check=True)
    import redis

    redis.Redis.from_url(redis_url).flushdb()
    data = api_bench.prepare()
    procs = []
    try:
        api_proc, api = daphne("controlplane.asgi:application", env, "daphne-start-api")
        plain_proc, plain = daphne("bench.api_bench:application", env, "daphne-start-plain")
        procs = [api_proc, plain_proc]
        wait_up(f"{api}/api/v1/health/live")
        wait_up(f"{plain}/plain/row/{data['plain_row']}")
        results = measure(api, plain, data["token"], {"api": api_proc.pid, "plain": plain_proc.pid})
        log("in this process: both paths through Django's test client, alternating rounds")
        results["in-process"] = measure_in_process(data["token"])
        load_avg = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    finally:
        for proc in procs:
            stop(proc)
    report(results, load_avg)
    (DATA / "start-results.json").write_text(json.dumps({**results, "uptime": load_avg}, indent=2))


if __name__ == "__main__":
    main()
