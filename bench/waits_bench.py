"""Waiting runs at rest and on waking: `WAITS=10000 .venv/bin/python bench/waits_bench.py`.

Starts one scheduler and one RQ worker (real processes) against a database of its own
(`switchyard_waitsbench` on the embedded servers in .data/bench-waits, or those
DATABASE_URL/REDIS_URL name), makes runs wait on an approval or an event, and prints:
- PostgreSQL (transactions, rows read) and Redis (commands) per second at rest, with a
  tenth of the runs waiting and then all of them: the figures must not grow with the number;
- RSS of the scheduler and the worker;
- the inbox query and the API's approval list (GET /api/v1/approvals, in process);
- the delay from a decision or an event to the next node's start (p50/p95, PostgreSQL clock).
Figures only; nothing here is asserted.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import servers  # bench/ is on the path when a bench runs

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
BIN = REPO / ".venv" / "bin"
DATA = REPO / ".data" / "bench-waits"
DB_NAME = "switchyard_waitsbench"
REDIS_DB = 4
WAITS = int(os.environ.get("WAITS") or 10000)
WAKES = int(os.environ.get("WAKES") or 200)
REST_SECONDS = float(os.environ.get("REST") or 10)


def log(message: str) -> None:
    print(time.strftime("%H:%M:%S"), message, file=sys.stderr, flush=True)


def service_urls() -> tuple[str, str]:
    return servers.service_urls(DATA, DB_NAME, REDIS_DB)  # read at call time: priority_bench sets them


def recreate_database(url: str) -> None:
    servers.recreate_database(url)


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


APPROVAL = {
    "nodes": [
        {
            "id": "ok",
            "handler": "human.approval",
            "config": {"due_seconds": 86400, "approvers": {"roles": ["operator"]}},
        },
        {"id": "next", "handler": "core.noop"},
    ],
    "edges": [{"source": "ok", "target": "next"}],
}
EVENT = {
    "nodes": [
        {"id": "w", "handler": "wait.event", "config": {"key": "input.k"}},
        {"id": "next", "handler": "core.noop"},
    ],
    "edges": [{"source": "w", "target": "next"}],
}


def prepare() -> dict[str, str]:
    """A fresh bench database, migrated, with Django set up in this process; return the env."""
    db_url, redis_url = service_urls()
    recreate_database(db_url)
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "REDIS_URL": redis_url,
        "DJANGO_SETTINGS_MODULE": "controlplane.settings",
    }
    os.environ.update(env)
    subprocess.run([str(BIN / "python"), "manage.py", "migrate", "-v", "0"], cwd=REPO, env=env, check=True)
    import django

    django.setup()
    return env


def start_processes(
    commands: dict[str, list[str]], env: dict[str, str]
) -> dict[str, subprocess.Popen[bytes]]:
    """Start `manage.py <command>` per name, logging to DATA/<name>.log, on an emptied Redis."""
    from workflows.runtime import bus

    bus.client().flushdb()
    bus.ensure_group()
    DATA.mkdir(parents=True, exist_ok=True)
    procs = {}
    for name, cmd in commands.items():
        with open(DATA / f"{name}.log", "ab") as out:
            procs[name] = subprocess.Popen(
                [str(BIN / "python"), "manage.py", *cmd],
                cwd=REPO,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
    return procs


def stop_processes(procs: dict[str, subprocess.Popen[bytes]]) -> None:
    for proc in procs.values():
        os.killpg(proc.pid, 15)
    for proc in procs.values():
        proc.wait(20)


def spread(xs: list[float]) -> dict[str, float]:
    return {"n": len(xs), "p50": round(pct(xs, 0.5), 1), "p95": round(pct(xs, 0.95), 1)}


def main() -> None:
    env = prepare()
    import psutil
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.utils import timezone

    from workflows.runs import actions as runs
    from workflows.runtime import bus  # noqa: F401
    from workflows.store.models import NodeRun, Wait
    from workflows.versions import publish as versions
    from workflows.waits import approvals, waiting as waits

    procs = start_processes(
        {
            "scheduler": ["runscheduler", "--name", "bench-s"],
            "worker": ["rqworker", "-v", "0", "--name", "bench-w", "default"],
        },
        env,
    )
    try:
        approval_flow = versions.create_workflow("bench-approval", "Approval")
        versions.publish_version(versions.create_version(approval_flow, APPROVAL))
        events = versions.create_workflow("bench-event", "Event")
        versions.publish_version(versions.create_version(events, EVENT))
        approval_flow.refresh_from_db(), events.refresh_from_db()
        admin = User.objects.create_superuser("bench", "b@example.test", "x")

        def start(n: int, offset: int) -> None:
            t0 = time.monotonic()
            for i in range(n):
                if i % 10 == 0:
                    runs.start_run(events, {"k": f"key-{offset + i}"})
                else:
                    runs.start_run(approval_flow, {"i": offset + i})
            target = Wait.objects.count() + 0
            deadline = time.monotonic() + 600
            while Wait.objects.count() < offset + n and time.monotonic() < deadline:
                time.sleep(0.5)
            log(
                f"{offset + n} waiting ({Wait.objects.count()} waits, {target}) after {time.monotonic() - t0:.1f} s"
            )

        def at_rest() -> dict[str, float]:
            time.sleep(2)  # let the last claims settle
            r = bus.client()

            def pg() -> tuple[int, int]:
                with connection.cursor() as cur:
                    cur.execute(
                        "SELECT xact_commit + xact_rollback, tup_returned + tup_fetched FROM pg_stat_database WHERE datname = %s",
                        [DB_NAME],
                    )
                    return cur.fetchone()

            def redis_calls() -> int:
                return sum(v["calls"] for k, v in r.info("commandstats").items())

            x0, rows0, c0 = *pg(), redis_calls()
            time.sleep(REST_SECONDS)
            x1, rows1, c1 = *pg(), redis_calls()
            rss = {
                name: sum(
                    p.memory_info().rss
                    for p in [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
                )
                / 2**20
                for name, proc in procs.items()
            }
            return {
                "pg_xact_per_s": round((x1 - x0) / REST_SECONDS, 1),
                "pg_rows_per_s": round((rows1 - rows0) / REST_SECONDS, 1),
                "redis_cmds_per_s": round((c1 - c0 - 2) / REST_SECONDS, 1),
                **{f"rss_{k}_mb": round(v, 1) for k, v in rss.items()},
            }

        results: dict[str, Any] = {}
        start(WAITS // 10, 0)
        results[f"rest_{WAITS // 10}_waiting"] = at_rest()
        start(WAITS - WAITS // 10, WAITS // 10)
        results[f"rest_{WAITS}_waiting"] = at_rest()
        log(json.dumps(results))

        times = []
        for _ in range(10):
            t0 = time.perf_counter()
            items = approvals.inbox(admin, limit=50)
            times.append((time.perf_counter() - t0) * 1000)
        results["inbox_50_ms_p50"] = round(statistics.median(times), 2)
        client = Client()
        client.force_login(admin)
        api_times = []
        for _ in range(10):
            t0 = time.perf_counter()
            response = client.get("/api/v1/approvals", {"limit": 50}, headers={"host": "localhost"})
            api_times.append((time.perf_counter() - t0) * 1000)
        assert response.status_code == 200, response.content
        results["api_list_50_ms_p50"] = round(statistics.median(api_times), 2)
        results["inbox_first_due"] = str(items[0].due_at) if items else None

        def delays(kind: str) -> list[float]:
            woken = []
            pending = list(Wait.objects.filter(kind=kind, closed_at__isnull=True).order_by("id")[:WAKES])
            for w in pending:
                with connection.cursor() as cur:
                    cur.execute("SELECT clock_timestamp()")
                    at = cur.fetchone()[0]
                if kind == "human.approval":
                    approvals.decide(w.pk, admin, "approve")
                else:
                    waits.post_event(w.key, {"ok": True})
                woken.append((w.run_id, at))
                time.sleep(0.02)
            deadline = time.monotonic() + 120
            started: dict[int, Any] = {}
            while len(started) < len(woken) and time.monotonic() < deadline:
                started = dict(
                    NodeRun.objects.filter(
                        run_id__in=[r for r, _ in woken], node_id="next", started_at__isnull=False
                    ).values_list("run_id", "started_at")
                )
                time.sleep(0.2)
            return [(started[r] - at).total_seconds() * 1000 for r, at in woken if r in started]

        for kind, label in (("human.approval", "decision"), ("wait.event", "event")):
            results[f"{label}_to_next_start_ms"] = spread(delays(kind))
        results["now"] = timezone.now().isoformat()
        print(json.dumps(results, indent=2))
    finally:
        stop_processes(procs)


if __name__ == "__main__":
    main()
