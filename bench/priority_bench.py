"""An urgent run's start behind a backlog: `BACKLOG=5000 .venv/bin/python bench/priority_bench.py`.

Starts one scheduler and two RQ workers (real processes) against a database of its own
(`switchyard_prioritybench` on the embedded servers in .data/bench-priority, or those
DATABASE_URL/REDIS_URL name). Queues BACKLOG low-priority nodes (priority -1, each a 50 ms
`core.delay`: about 40 nodes/s on two workers, so the backlog outlasts the measurement),
then starts SAMPLES one-node runs at priority 10, one at a time, and prints the delay from
each run's creation to its node's start (p50/p95, PostgreSQL clock), beside the same
figure with no backlog (idle) and one run at the default priority behind what is left of
the backlog. Figures only; nothing here is asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import waits_bench  # noqa: E402 - its service set-up, pointed at this bench's database

REPO = waits_bench.REPO
BIN = waits_bench.BIN
waits_bench.DATA = REPO / ".data" / "bench-priority"
waits_bench.DB_NAME = "switchyard_prioritybench"
waits_bench.REDIS_DB = 5
BACKLOG = int(os.environ.get("BACKLOG") or 5000)
SAMPLES = int(os.environ.get("SAMPLES") or 50)
URGENT = 10
LOW = -1

SLOW = {"nodes": [{"id": "work", "handler": "core.delay", "config": {"seconds": 0.05}}], "edges": []}
QUICK = {"nodes": [{"id": "go", "handler": "core.noop"}], "edges": []}

log = waits_bench.log


def spawn(name: str, cmd: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    with open(waits_bench.DATA / f"{name}.log", "ab") as out:
        return subprocess.Popen(
            [str(BIN / "python"), "manage.py", *cmd],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def main() -> None:
    db_url, redis_url = waits_bench.service_urls()
    waits_bench.recreate_database(db_url)
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
    from workflows.store.models import NodeRun
    from workflows.versions import publish as versions

    bus.client().flushdb()
    bus.ensure_group()
    waits_bench.DATA.mkdir(parents=True, exist_ok=True)
    procs = {"scheduler": spawn("scheduler", ["runscheduler", "--name", "bench-s"], env)}

    def workflow(slug: str, definition: dict[str, Any]) -> Any:
        made = versions.create_workflow(slug, slug)
        versions.publish_version(versions.create_version(made, definition))
        made.refresh_from_db()
        return made

    def start_workers() -> None:
        for n in (1, 2):
            procs[f"worker-{n}"] = spawn(
                f"worker-{n}", ["rqworker", "-v", "0", "--name", f"bench-w{n}", "default"], env
            )
        wait(lambda: len(bus.live_workers(5)) >= 2, 120, "two workers")

    def wait(predicate: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out waiting for {what}")
            time.sleep(0.01)

    def queued_low() -> int:
        return NodeRun.objects.filter(node_id="work", status="queued").count()

    def start_latency(flow: Any, priority: int, timeout: float = 60) -> float:
        run, _ = runs.start_run(flow, {}, priority=priority)
        node = NodeRun.objects.filter(run=run)
        wait(lambda: node.filter(started_at__isnull=False).exists(), timeout, f"run {run.pk} to start")
        return (node.get().started_at - run.created_at).total_seconds() * 1000

    def sample(flow: Any) -> dict[str, Any]:
        latencies, left = [], []
        for _ in range(SAMPLES):
            latencies.append(start_latency(flow, URGENT))
            left.append(queued_low())
            time.sleep(0.05)
        return {
            "n": len(latencies),
            "p50_ms": round(waits_bench.pct(latencies, 0.5), 1),
            "p95_ms": round(waits_bench.pct(latencies, 0.95), 1),
            "backlog_queued_min": min(left),
            "backlog_queued_max": max(left),
        }

    try:
        slow, quick = workflow("bench-backlog", SLOW), workflow("bench-urgent", QUICK)
        start_workers()
        results: dict[str, Any] = {"idle": sample(quick)}
        log(f"idle: {results['idle']}")
        for name in ("worker-1", "worker-2"):  # the backlog is queued with no worker taking it
            os.killpg(procs.pop(name).pid, 15)
        t0 = time.monotonic()
        for n in range(BACKLOG):
            runs.start_run(slow, {"n": n}, priority=LOW)
        wait(lambda: queued_low() >= BACKLOG, 300, "the backlog to be queued")
        log(f"{BACKLOG} low-priority nodes queued in {time.monotonic() - t0:.1f} s")
        start_workers()
        results["behind_backlog"] = sample(quick)
        log(f"behind the backlog: {results['behind_backlog']}")
        left = queued_low()
        results["default_priority_behind_backlog"] = {
            "backlog_queued": left,
            "ms": round(start_latency(quick, 0, timeout=max(60, left / 10)), 1),
        }
        print(json.dumps({"backlog": BACKLOG, **results}, indent=2))
    finally:
        for proc in procs.values():
            os.killpg(proc.pid, 15)
        for proc in procs.values():
            proc.wait(20)


if __name__ == "__main__":
    main()
