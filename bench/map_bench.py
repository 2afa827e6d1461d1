"""A 10,000-item map of no-op items beside 10,000 runs and a Celery group: `.venv/bin/python bench/map_bench.py`.

Starts one scheduler and two RQ workers (real processes, as the peers bench gives every
system two workers) against a database of its own (`switchyard_mapbench` on the embedded
servers in .data/bench-map, or those DATABASE_URL/REDIS_URL name), and in one sitting:
1. one run whose map node runs `core.noop` over 10,000 items, max_parallel 1,000;
2. the same work as 10,000 separate runs of a one-node (`core.noop`) workflow;
3. a Celery `group` of 10,000 no-op tasks, 2 prefork worker processes, the same Redis
   (bench/celery_group.py, in a venv of its own: ITEMS=... CELERY_PYTHON=... to point
   elsewhere; `python3 -m venv .data/celery-venv && .data/celery-venv/bin/pip install
   "celery[redis]==5.7.0" psutil` as in ../shared/peers-bench/requirements.txt).
For each: wall seconds, items/s, and CPU seconds per 1,000 items of the runtime processes
(scheduler and workers; the bench process for starts and polling, the Celery client),
PostgreSQL and Redis. Figures only; nothing here is asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import servers  # bench/ is on the path when a bench runs

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
BIN = REPO / ".venv" / "bin"
DATA = REPO / ".data" / "bench-map"
DB_NAME = "switchyard_mapbench"
REDIS_DB = 5
ITEMS = int(os.environ.get("ITEMS") or 10_000)
CELERY_PYTHON = os.environ.get("CELERY_PYTHON") or str(REPO / ".data" / "celery-venv" / "bin" / "python")


def log(message: str) -> None:
    print(time.strftime("%H:%M:%S"), message, file=sys.stderr, flush=True)


def service_urls() -> tuple[str, str]:
    return servers.service_urls(DATA, DB_NAME, REDIS_DB)  # read at call time: priority_bench sets them


def recreate_database(url: str) -> None:
    servers.recreate_database(url)


def listener(port: int) -> int:
    """The pid listening on a local TCP port (PostgreSQL's postmaster, Valkey)."""
    import psutil

    for conn in psutil.net_connections(kind="tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.laddr.port == port and conn.pid:
            return int(conn.pid)
    raise RuntimeError(f"nothing listens on port {port}")


def cpu_of(pids: list[int]) -> float:
    """CPU seconds (user + system) of these processes and all their children."""
    import psutil

    total = 0.0
    for pid in pids:
        try:
            root = psutil.Process(pid)
            for p in [root, *root.children(recursive=True)]:
                t = p.cpu_times()
                total += t.user + t.system
        except psutil.NoSuchProcess:
            continue
    return total


class Meter:
    """CPU seconds per group of processes over a phase."""

    def __init__(self, groups: dict[str, list[int]]) -> None:
        self.groups = groups
        self.start: dict[str, float] = {}

    def begin(self) -> None:
        self.start = {name: cpu_of(pids) for name, pids in self.groups.items()}

    def end(self, items: int, seconds: float) -> dict[str, Any]:
        spent = {name: cpu_of(pids) - self.start[name] for name, pids in self.groups.items()}
        per_k = {f"cpu_s_per_1000_{name}": round(v * 1000 / items, 3) for name, v in spent.items()}
        return {
            "seconds": round(seconds, 2),
            "items_per_s": round(items / seconds, 1),
            **per_k,
            "cpu_s_per_1000_total": round(sum(spent.values()) * 1000 / items, 3),
        }


def main() -> None:
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
    from workflows.runs import actions as runs
    from workflows.runtime import bus
    from workflows.store.models import Run
    from workflows.versions import publish as versions

    bus.client().flushdb()
    bus.ensure_group()
    DATA.mkdir(parents=True, exist_ok=True)
    procs = {}
    for name, cmd in (
        ("scheduler", ["runscheduler", "--name", "bench-s"]),
        ("worker-1", ["rqworker", "-v", "0", "--name", "bench-w1", "default"]),
        ("worker-2", ["rqworker", "-v", "0", "--name", "bench-w2", "default"]),
    ):
        with open(DATA / f"{name}.log", "ab") as out:
            procs[name] = subprocess.Popen(
                [str(BIN / "python"), "manage.py", *cmd],
                cwd=REPO,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
    pg_pid, redis_pid = listener(urlsplit(db_url).port or 5432), listener(urlsplit(redis_url).port or 6379)
    meter = Meter(
        {
            "runtime": [p.pid for p in procs.values()] + [os.getpid()],
            "postgres": [pg_pid],
            "redis": [redis_pid],
        }
    )
    try:
        mapped = versions.create_workflow("bench-map", "Map")
        definition = {
            "nodes": [{"id": "each", "handler": "core.noop", "map": "input.items", "max_parallel": 1000}]
        }
        versions.publish_version(versions.create_version(mapped, definition))
        single = versions.create_workflow("bench-single", "Single")
        versions.publish_version(
            versions.create_version(single, {"nodes": [{"id": "one", "handler": "core.noop"}]})
        )
        mapped.refresh_from_db(), single.refresh_from_db()
        warm, _ = runs.start_run(mapped, {"items": list(range(100))})
        wait_all([warm.pk], Run, 120)
        time.sleep(3)
        results: dict[str, Any] = {"items": ITEMS, "workers": 2}

        meter.begin()
        t0 = time.perf_counter()
        run, _ = runs.start_run(mapped, {"items": list(range(ITEMS))})
        wait_all([run.pk], Run, 900)
        results["map"] = meter.end(ITEMS, time.perf_counter() - t0)
        run.refresh_from_db()
        results["map"]["status"] = run.status
        log(f"map: {results['map']}")
        time.sleep(3)

        meter.begin()
        t0 = time.perf_counter()
        ids = [runs.start_run(single, {"i": i})[0].pk for i in range(ITEMS)]
        wait_all(ids, Run, 900)
        results["separate_runs"] = meter.end(ITEMS, time.perf_counter() - t0)
        log(f"runs: {results['separate_runs']}")

        for proc in procs.values():
            os.killpg(proc.pid, 15)
        for proc in procs.values():
            proc.wait(30)
        procs.clear()
        time.sleep(3)
        results["celery_group"] = celery_group(redis_url, redis_pid)
        log(f"celery: {results['celery_group']}")
        print(json.dumps(results, indent=2))
    finally:
        for proc in procs.values():
            os.killpg(proc.pid, 15)
        for proc in procs.values():
            proc.wait(30)


def wait_all(ids: list[int], run_model: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = run_model.objects.filter(pk__in=ids, status__in=["running", "waiting"]).count()
        if not left:
            return
        time.sleep(0.25)
    raise RuntimeError(f"{left} runs still running after {timeout:g} s")


def celery_group(redis_url: str, redis_pid: int) -> dict[str, Any]:
    if not Path(CELERY_PYTHON).exists():
        return {"skipped": f"no Celery venv at {CELERY_PYTHON}"}
    base = urlunsplit(urlsplit(redis_url)._replace(path=""))
    out = subprocess.run(
        [CELERY_PYTHON, str(REPO / "bench" / "celery_group.py"), str(ITEMS), str(redis_pid)],
        env={**os.environ, "MAPBENCH_BROKER": base},
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    )
    raw = json.loads(out.stdout.strip().splitlines()[-1])
    spent = {"runtime": raw["cpu_workers"] + raw["cpu_client"], "redis": raw["cpu_redis"]}
    return {
        "seconds": raw["seconds"],
        "items_per_s": raw["per_second"],
        **{f"cpu_s_per_1000_{k}": round(v * 1000 / ITEMS, 3) for k, v in spent.items()},
        "cpu_s_per_1000_total": round(sum(spent.values()) * 1000 / ITEMS, 3),
    }


if __name__ == "__main__":
    main()
