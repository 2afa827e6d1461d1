"""Runs that wait, shown and searched (workflows/runs/waiting.py), at scale:
`.venv/bin/python bench/waiting_bench.py`.

Fills a database of its own (`switchyard_waitingbench`, on the embedded servers of
.data/bench-waiting or those DATABASE_URL/REDIS_URL name) with WAITING running runs (20,000)
each with a waiting node and an open Wait row, RUNNING running runs (5,000) without, and
FINISHED succeeded runs (50,000), bulk-inserted with SQL, then ANALYZE. Then times, REPEAT
times each, in process: the overview's in-flight count by stored status (before) and by the
status shown (after), the runs page's search for `waiting` and for `running` (one page of
51), and `waiting_for` over a page of 50 waiting runs. Figures only; nothing is asserted.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench import servers  # noqa: E402 - the repository is on the path from here
from bench.harness import log  # noqa: E402

DATA = REPO / ".data" / "bench-waiting"
DB_NAME = "switchyard_waitingbench"
REDIS_DB = 6
WAITING = int(os.environ.get("WAITING") or 20_000)
RUNNING = int(os.environ.get("RUNNING") or 5_000)
FINISHED = int(os.environ.get("FINISHED") or 50_000)
REPEAT = int(os.environ.get("REPEAT") or 20)

RUNS_SQL = """
INSERT INTO workflows_run (workflow_id, version_id, status, waiting_nodes, priority, input, request_hash, epoch, created_at)
SELECT %(workflow)s, %(version)s, %(status)s, %(waiting)s, 0, '{}'::jsonb, '', 0, now() FROM generate_series(1, %(n)s)
"""
NODES_SQL = """
INSERT INTO workflows_noderun (run_id, node_id, status, attempt, tries, queue, job_id, worker, error, traceback)
SELECT id, 'hold', 'waiting', 1, 1, 'default', '', '', '', '' FROM workflows_run WHERE waiting_nodes = 1
"""
WAITS_SQL = """
INSERT INTO workflows_wait (node_run_id, run_id, workflow_id, node_id, attempt, kind, title, key, first_only,
                            users, groups, roles, open_to_operators, created_at, outcome)
SELECT n.id, n.run_id, %(workflow)s, 'hold', 1, 'wait.event', '', 'k', false, '{}', '{}', '{}', false, now(), ''
FROM workflows_noderun n
"""
BEFORE_SQL = """
SELECT workflow_id, status, count(*) FROM workflows_run WHERE status IN ('running', 'waiting') GROUP BY 1, 2
"""


def fill() -> None:
    from django.db import connection

    from workflows.versions import publish as versions

    flow = versions.create_workflow("bench-waiting", "Bench waiting")
    hold = {"id": "hold", "handler": "wait.event", "config": {"key": "input.k"}}
    version = versions.publish_version(versions.create_version(flow, {"nodes": [hold]}))
    with connection.cursor() as cur:
        for status, waiting, n in (
            ("running", 1, WAITING),
            ("running", 0, RUNNING),
            ("succeeded", 0, FINISHED),
        ):
            cur.execute(
                RUNS_SQL,
                {"workflow": flow.pk, "version": version.pk, "status": status, "waiting": waiting, "n": n},
            )
        cur.execute(NODES_SQL)
        cur.execute(WAITS_SQL, {"workflow": flow.pk})
        cur.execute("ANALYZE")
    log(f"filled: {WAITING} waiting, {RUNNING} running, {FINISHED} finished runs")


def timed(call: Callable[[], object]) -> tuple[float, float]:
    call()  # warm the plan and the cache
    times = []
    for _ in range(REPEAT):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), statistics.quantiles(times, n=20)[-1]


def sql(text: str) -> Callable[[], object]:
    from django.db import connection

    def run() -> object:
        with connection.cursor() as cur:
            cur.execute(text)
            return cur.fetchall()

    return run


def main() -> None:
    servers.fresh_django(DATA, DB_NAME, REDIS_DB)
    fill()
    from workflows.runs import search as runsearch, waiting
    from workflows.store.models import Run

    def search(status: str) -> Callable[[], object]:
        return lambda: list(runsearch.RunSearch(status=status).apply(Run.objects.all()).order_by("-id")[:51])

    page = list(Run.objects.filter(status="running", waiting_nodes=1).order_by("-id")[:50])
    rows = [
        ("overview in flight, by stored status (before)", timed(sql(BEFORE_SQL))),
        ("overview in flight, by status shown (after)", timed(sql(waiting.IN_FLIGHT_BY_SHOWN_STATUS_SQL))),
        ("runs search status=waiting, a page of 51", timed(search("waiting"))),
        ("runs search status=running, a page of 51", timed(search("running"))),
        ("waiting_for, a page of 50 waiting runs", timed(lambda: waiting.waiting_for(page))),
    ]
    print(
        f"\nRuns that wait: {WAITING:,} waiting, {RUNNING:,} running, {FINISHED:,} finished; {REPEAT} tries (ms)\n"
    )
    print("| query | p50 ms | p95 ms |")
    print("|---|---:|---:|")
    for name, (p50, p95) in rows:
        print(f"| {name} | {p50:.1f} | {p95:.1f} |")


if __name__ == "__main__":
    main()
