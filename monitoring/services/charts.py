"""The charts' series: bucketed SQL over a window, every bucket present (generate_series).

Each chart answers `{"t": [unix seconds], "series": [{"label", "values"}], "step": seconds}`
for one window (WINDOWS) and optionally one workflow. Buckets are `date_bin(step, ts,
epoch)`, so two requests in the same bucket agree, and empty buckets come back as 0 (or null
for durations: no run finished, no duration). Each query reads one index range:
run_finished_idx / run_workflow_finished_idx (runs and durations), deadletter_created_idx
(dead letters), backlog_at_idx / backlog_workflow_at_idx (backlog samples). bench/charts_bench.py
times them with 100,000 runs and 40,000 dead letters.

The backlog has no history in Postgres of its own (queue depth lives in Redis), so the
broadcaster samples it (`sample_backlog`): each queue's depth and each workflow's queued
nodes, every BACKLOG_SAMPLE_SECONDS.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from workflows.store.models import BacklogSample
from workflows.store.statements import BACKLOG_SAMPLES, DEAD_LETTERS, RUNS, WORKFLOWS


@dataclass(frozen=True)
class Window:
    span: timedelta
    step: timedelta


WINDOWS = {
    "15m": Window(timedelta(minutes=15), timedelta(minutes=1)),
    "1h": Window(timedelta(hours=1), timedelta(minutes=1)),
    "6h": Window(timedelta(hours=6), timedelta(minutes=5)),
    "24h": Window(timedelta(hours=24), timedelta(minutes=15)),
    "7d": Window(timedelta(days=7), timedelta(hours=1)),
}
WINDOW_LABELS = {"15m": "15 min", "1h": "1 h", "6h": "6 h", "24h": "24 h", "7d": "7 d"}
TOP_WORKFLOWS = 5  # duration lines on the overview: the busiest workflows of the window

BUCKETS = """
WITH buckets AS (
  SELECT generate_series(date_bin(%(step)s, %(start)s, 'epoch'), date_bin(%(step)s, %(end)s, 'epoch'), %(step)s) AS t
)
"""

RUNS_SQL = (
    BUCKETS
    + f"""
SELECT b.t, coalesce(c.ok, 0), coalesce(c.bad, 0)
FROM buckets b LEFT JOIN (
  SELECT date_bin(%(step)s, finished_at, 'epoch') AS t,
         count(*) FILTER (WHERE status = 'succeeded') AS ok,
         count(*) FILTER (WHERE status = 'failed') AS bad
  FROM {RUNS}
  WHERE finished_at >= %(start)s AND finished_at <= %(end)s {{scope}}
  GROUP BY 1) c ON c.t = b.t
ORDER BY b.t
"""
)

DURATIONS_SQL = (
    BUCKETS
    + f"""
, finished AS (
  SELECT workflow_id, date_bin(%(step)s, finished_at, 'epoch') AS t,
         extract(epoch FROM finished_at - created_at) * 1000 AS ms
  FROM {RUNS}
  WHERE finished_at >= %(start)s AND finished_at <= %(end)s
    AND status IN ('succeeded', 'failed') {{scope}}
), top AS (
  SELECT workflow_id FROM finished GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT %(top)s
), agg AS (
  SELECT workflow_id, t,
         percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS p50,
         percentile_cont(0.95) WITHIN GROUP (ORDER BY ms) AS p95
  FROM finished WHERE workflow_id IN (SELECT workflow_id FROM top)
  GROUP BY 1, 2
)
SELECT w.slug, b.t, a.p50, a.p95
FROM top JOIN {WORKFLOWS} w ON w.id = top.workflow_id
CROSS JOIN buckets b
LEFT JOIN agg a ON a.workflow_id = top.workflow_id AND a.t = b.t
ORDER BY w.slug, b.t
"""
)

LETTERS_SQL = (
    BUCKETS
    + f"""
SELECT b.t, coalesce(c.n, 0)
FROM buckets b LEFT JOIN (
  SELECT date_bin(%(step)s, d.created_at, 'epoch') AS t, count(*) AS n
  FROM {DEAD_LETTERS} d {{join}}
  WHERE d.created_at >= %(start)s AND d.created_at <= %(end)s {{scope}}
  GROUP BY 1) c ON c.t = b.t
ORDER BY b.t
"""
)

BACKLOG_SQL = (
    BUCKETS
    + f"""
, names AS (
  SELECT DISTINCT queue FROM {BACKLOG_SAMPLES}
  WHERE at >= %(start)s AND at <= %(end)s {{scope}}
)
SELECT n.queue, b.t, s.depth
FROM names n CROSS JOIN buckets b
LEFT JOIN (
  SELECT queue, date_bin(%(step)s, at, 'epoch') AS t, max(depth) AS depth
  FROM {BACKLOG_SAMPLES}
  WHERE at >= %(start)s AND at <= %(end)s {{scope}}
  GROUP BY 1, 2) s ON s.queue = n.queue AND s.t = b.t
ORDER BY n.queue, b.t
"""
)


def params(window: Window, now: datetime, workflow_id: int | None) -> dict[str, Any]:
    return {
        "step": window.step,
        "start": now - window.span,
        "end": now,
        "wf": workflow_id,
        "top": TOP_WORKFLOWS,
    }


def query(sql: str, args: dict[str, Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cur:
        cur.execute(sql, args)
        found: list[tuple[Any, ...]] = cur.fetchall()
        return found


def runs(window: Window, now: datetime, workflow_id: int | None = None) -> dict[str, Any]:
    """Runs that finished, succeeded and failed, per bucket."""
    scope = "AND workflow_id = %(wf)s" if workflow_id else ""
    rows = query(RUNS_SQL.format(scope=scope), params(window, now, workflow_id))
    return answer(
        window, [r[0] for r in rows], [("succeeded", [r[1] for r in rows]), ("failed", [r[2] for r in rows])]
    )


def durations(window: Window, now: datetime, workflow_id: int | None = None) -> dict[str, Any]:
    """Run duration p50 and p95 (ms) per bucket, per workflow (the busiest, on the overview)."""
    scope = "AND workflow_id = %(wf)s" if workflow_id else ""
    rows = query(DURATIONS_SQL.format(scope=scope), params(window, now, workflow_id))
    times = bucket_times(window, now)
    series: list[tuple[str, list[Any]]] = []
    for slug in dict.fromkeys(r[0] for r in rows):
        mine = [r for r in rows if r[0] == slug]
        series += [(f"{slug} p50", [r[2] for r in mine]), (f"{slug} p95", [r[3] for r in mine])]
    return answer(window, times, series)


def dead_letters(window: Window, now: datetime, workflow_id: int | None = None) -> dict[str, Any]:
    """Dead letters opened per bucket."""
    join = f"JOIN {RUNS} r ON r.id = d.run_id" if workflow_id else ""
    scope = "AND r.workflow_id = %(wf)s" if workflow_id else ""
    rows = query(LETTERS_SQL.format(join=join, scope=scope), params(window, now, workflow_id))
    return answer(window, [r[0] for r in rows], [("opened", [r[1] for r in rows])])


def backlog(window: Window, now: datetime, workflow_id: int | None = None) -> dict[str, Any]:
    """Jobs waiting: the highest sample per bucket, per queue (or the workflow's queued nodes)."""
    scope = "AND workflow_id = %(wf)s" if workflow_id else "AND workflow_id IS NULL"
    rows = query(BACKLOG_SQL.format(scope=scope), params(window, now, workflow_id))
    times = bucket_times(window, now)
    names = list(dict.fromkeys(r[0] for r in rows))
    series = [(name or "queued nodes", [r[2] for r in rows if r[0] == name]) for name in names]
    return answer(window, times, series)


def bucket_times(window: Window, now: datetime) -> list[datetime]:
    rows = query(BUCKETS + "SELECT t FROM buckets ORDER BY t", params(window, now, None))
    return [r[0] for r in rows]


def answer(window: Window, times: list[datetime], series: list[tuple[str, list[Any]]]) -> dict[str, Any]:
    return {
        "step": int(window.step.total_seconds()),
        "t": [int(t.timestamp()) for t in times],
        "series": [
            {"label": label, "values": [none_or_number(v) for v in values]} for label, values in series
        ],
    }


def none_or_number(value: Any) -> float | int | None:
    return None if value is None else (int(value) if isinstance(value, int) else round(float(value), 1))


CHARTS = {"runs": runs, "durations": durations, "deadletters": dead_letters, "backlog": backlog}


def chart(
    name: str, window_name: str, workflow_id: int | None = None, now: datetime | None = None
) -> dict[str, Any]:
    """One chart's data; KeyError names an unknown chart or window (the view answers 400)."""
    return {
        "chart": name,
        "window": window_name,
        **CHARTS[name](WINDOWS[window_name], now or timezone.now(), workflow_id),
    }


# --------------------------------------------------------------------------- sampling


def sample_backlog(depths: dict[str, int], queued_by_workflow: dict[int, int], now: datetime) -> None:
    """Record one sample of every queue and every workflow with queued nodes; drop old ones."""
    rows = [BacklogSample(at=now, queue=name, depth=depth) for name, depth in depths.items()]
    rows += [BacklogSample(at=now, workflow_id=wf, depth=n) for wf, n in queued_by_workflow.items()]
    BacklogSample.objects.bulk_create(rows)
    keep = timedelta(days=settings.MONITOR["BACKLOG_KEEP_DAYS"])
    BacklogSample.objects.filter(at__lt=now - keep).delete()
