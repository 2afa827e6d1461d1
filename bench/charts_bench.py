"""The charts' queries at scale: `.venv/bin/python bench/charts_bench.py`.

Fills a database of its own (`switchyard_chartsbench`, on the embedded servers of
.data/bench-charts or those DATABASE_URL/REDIS_URL name) with RUNS runs (100,000) of five
workflows finished over the last 7 days, LETTERS dead letters (40,000) and 7 days of backlog
samples (every 30 s, two queues and five workflows), all bulk-inserted with SQL
(generate_series), then ANALYZE. Then times every chart (monitoring/services/charts.py) for every
window, over all workflows and for one, REPEAT times each, in process (the SQL and the
shaping of the answer, no HTTP), and prints p50/p95 in ms and the indexes the plan reads.
Figures only; nothing here is asserted.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench import servers  # noqa: E402 - the repository is on the path from here
from bench.harness import log  # noqa: E402

BIN = REPO / ".venv" / "bin"
DATA = REPO / ".data" / "bench-charts"
DB_NAME = "switchyard_chartsbench"
REDIS_DB = 5
RUNS = int(os.environ.get("RUNS") or 100_000)
LETTERS = int(os.environ.get("LETTERS") or 40_000)
REPEAT = int(os.environ.get("REPEAT") or 20)
WORKFLOWS = 5

# Runs finish at random over 7 days, 1 s to 2 min after their start; 1 in 8 fails.
RUNS_SQL = """
INSERT INTO workflows_run (workflow_id, version_id, status, input, request_hash, epoch, created_at, finished_at)
SELECT v.workflow_id, v.id, CASE WHEN random() < 0.125 THEN 'failed' ELSE 'succeeded' END, '{}'::jsonb, '', 0,
       f.at - make_interval(secs => 1 + random() * 120), f.at
FROM generate_series(1, %(runs)s) AS g(n)
CROSS JOIN LATERAL (SELECT now() - random() * interval '7 days' + g.n * interval '0' AS at) f
JOIN workflows_workflowversion v ON v.id = (SELECT min(id) FROM workflows_workflowversion) + (g.n %% %(workflows)s)
"""
NODES_SQL = """
INSERT INTO workflows_noderun (run_id, node_id, status, attempt, tries, queue, job_id, worker, error, traceback)
SELECT id, 'a', 'dead', 3, 3, 'default', '', 'bench', 'boom', ''
FROM workflows_run ORDER BY id LIMIT %(letters)s
"""
LETTERS_SQL = """
INSERT INTO workflows_deadletter (run_id, node_run_id, node_id, attempt, error, traceback, input_snapshot, status,
                                  created_at, reason)
SELECT n.run_id, n.id, n.node_id, 3, 'boom', '', '{}'::jsonb,
       CASE WHEN random() < 0.3 THEN 'open' ELSE 'replayed' END, r.finished_at, ''
FROM workflows_noderun n JOIN workflows_run r ON r.id = n.run_id
"""
SAMPLES_SQL = """
INSERT INTO workflows_backlogsample (at, queue, workflow_id, depth)
SELECT t, q, NULL, (random() * 500)::int
FROM generate_series(now() - interval '7 days', now(), interval '30 seconds') t, unnest(ARRAY['default', 'agents']) q
UNION ALL
SELECT t, '', w.id, (random() * 200)::int
FROM generate_series(now() - interval '7 days', now(), interval '30 seconds') t, workflows_workflow w
"""


def fill() -> None:
    from django.db import connection

    from workflows.versions import publish as versions

    for n in range(WORKFLOWS):
        flow = versions.create_workflow(f"bench-{n}", f"Bench {n}")
        versions.publish_version(
            versions.create_version(flow, {"nodes": [{"id": "a", "handler": "core.noop"}]})
        )
    args = {"runs": RUNS, "letters": LETTERS, "workflows": WORKFLOWS}
    with connection.cursor() as cur:
        for name, sql in (
            ("runs", RUNS_SQL),
            ("nodes", NODES_SQL),
            ("letters", LETTERS_SQL),
            ("samples", SAMPLES_SQL),
        ):
            started = time.monotonic()
            cur.execute(sql, args)
            log(f"inserted {cur.rowcount} {name} in {time.monotonic() - started:.1f} s")
        cur.execute("ANALYZE")


def indexes_read(name: str, window: str, workflow_id: int | None) -> list[str]:
    """The indexes PostgreSQL's plan reads for one chart (EXPLAIN of its main query)."""
    from django.db import connection

    from monitoring.services import charts

    captured: list[str] = []
    original = charts.query

    def explain(sql: str, args: dict[str, Any]) -> list[tuple[Any, ...]]:
        with connection.cursor() as cur:
            cur.execute("EXPLAIN (FORMAT JSON) " + sql, args)
            found = set(json.dumps(cur.fetchone()[0]).split('"Index Name": "')[1:])
            captured.extend(sorted({part.split('"')[0] for part in found}))
        return original(sql, args)

    charts.query = explain
    try:
        charts.chart(name, window, workflow_id)
    finally:
        charts.query = original
    return sorted(set(captured))


def measure() -> list[dict[str, Any]]:
    from monitoring.services import charts
    from workflows.store.models import Workflow

    one = Workflow.objects.get(slug="bench-0").pk
    rows = []
    for name in charts.CHARTS:
        for window in charts.WINDOWS:
            for scope, workflow_id in (("all", None), ("one workflow", one)):
                charts.chart(name, window, workflow_id)  # warm the cache and the plan
                times = []
                for _ in range(REPEAT):
                    started = time.perf_counter()
                    charts.chart(name, window, workflow_id)
                    times.append((time.perf_counter() - started) * 1000)
                rows.append(
                    {
                        "chart": name,
                        "window": window,
                        "scope": scope,
                        "p50": statistics.median(times),
                        "p95": statistics.quantiles(times, n=20)[-1],
                        "indexes": indexes_read(name, window, workflow_id),
                    }
                )
    return rows


def main() -> None:
    servers.fresh_django(DATA, DB_NAME, REDIS_DB)
    fill()
    rows = measure()
    print(f"\nCharts' queries, {RUNS:,} runs and {LETTERS:,} dead letters, {REPEAT} tries each (ms)\n")
    print("| chart | window | scope | p50 ms | p95 ms | indexes read |")
    print("|---|---|---|---:|---:|---|")
    for r in rows:
        print(
            f"| {r['chart']} | {r['window']} | {r['scope']} | {r['p50']:.1f} | {r['p95']:.1f} | "
            f"{', '.join(r['indexes']) or 'none'} |"
        )


if __name__ == "__main__":
    main()
