"""Reads the dashboard is derived from: a few cheap queries per tick, nothing on the hot path.

Postgres is read through indexes only: run events by primary key (an outbox that every
finished attempt and every run transition already writes), in-flight node rows through the
partial indexes on their status, runs through their status index. Redis gives queue depths,
heartbeats and the schedulers' backlog of notices.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, TypedDict, cast

import django_rq
import redis
from django.conf import settings
from django.db import connection
from rq import Worker
from rq.suspension import WORKERS_SUSPENDED

from workflows.operations import workers
from workflows.runs import waiting
from workflows.runtime import bus, rqcompat
from workflows.store.models import Workflow
from workflows.store.statements import DEAD_LETTERS, EVENTS, NODES, RUNS, WAITS

EVENT_BATCH = 20_000
GAP_SECONDS = 10.0  # a transaction holding an event id longer than this is taken as rolled back
MAX_GAPS = 50_000

EVENT_COLUMNS = f"""
SELECT e.id, e.run_id, r.workflow_id, e.kind, e.node_id, e.attempt,
       extract(epoch FROM e.at)::float8, extract(epoch FROM e.started_at)::float8,
       e.data->>'status', (e.data->>'duration_ms')::float8
FROM {EVENTS} e JOIN {RUNS} r ON r.id = e.run_id
"""
NEW_EVENTS_SQL = EVENT_COLUMNS + "WHERE e.id > %s ORDER BY e.id LIMIT %s"
GAP_EVENTS_SQL = EVENT_COLUMNS + "WHERE e.id = ANY(%s)"

# Two statements, so that each one matches the predicate of a partial index.
IN_FLIGHT_SQL = f"""
SELECT r.workflow_id, n.node_id, n.status, count(*)
FROM {NODES} n JOIN {RUNS} r ON r.id = n.run_id
WHERE n.status IN ('queued', 'running', 'failed') GROUP BY 1, 2, 3
UNION ALL
SELECT r.workflow_id, n.node_id, n.status, count(*)
FROM {NODES} n JOIN {RUNS} r ON r.id = n.run_id
WHERE n.status = 'retrying' GROUP BY 1, 2, 3
"""

# Node rows that became queued or running lately: they leave no run event of their own.
MOVED_SQL = f"""
SELECT n.id, n.run_id, n.status, n.attempt FROM {NODES} n
WHERE n.status IN ('queued', 'running', 'failed')
  AND greatest(n.queued_at, n.started_at) > now() - %s * interval '1 second'
"""

# By the status shown (workflows/runs/waiting.py): a running run that waits counts as waiting.
RUNS_IN_FLIGHT_SQL = waiting.IN_FLIGHT_BY_SHOWN_STATUS_SQL

OPEN_LETTERS_SQL = f"""
SELECT r.workflow_id, count(*) FROM {DEAD_LETTERS} d JOIN {RUNS} r ON r.id = d.run_id
WHERE d.status = 'open' GROUP BY 1
"""

# Open waits by kind: counted under the partial indexes of open waits, once a second.
OPEN_WAITS_SQL = f"""
SELECT kind, count(*) FROM {WAITS} WHERE closed_at IS NULL GROUP BY 1
"""

RECENT_RUNS_SQL = f"""
SELECT workflow_id, status, extract(epoch FROM date_trunc('minute', finished_at))::bigint, count(*)
FROM {RUNS}
WHERE status IN ('succeeded', 'failed') AND finished_at > now() - interval '1 hour'
  AND finished_at <= to_timestamp(%s)
GROUP BY 1, 2, 3
"""

RUNNING_ATTEMPTS_SQL = f"""
SELECT n.worker, n.run_id, n.node_id, n.attempt, extract(epoch FROM n.started_at)::float8
FROM {NODES} n WHERE n.status = 'running' ORDER BY n.started_at LIMIT 500
"""


@dataclass(frozen=True)
class Event:
    id: int
    run_id: int
    workflow_id: int
    kind: str
    node_id: str
    attempt: int
    at: float
    started_at: float | None
    status: str | None
    duration_ms: float | None


class EventReader:
    """Read run events once each, in id order, even when ids commit out of order.

    Ids come from a sequence, so a transaction can commit id 101 before id 100. Every id
    skipped over is remembered as a gap and looked up again on later reads until it shows up
    or GAP_SECONDS pass (its transaction rolled back). `cursor` is the low watermark: every
    event with an id up to it has been read (or given up on).
    """

    def __init__(self, start_after: int) -> None:
        self.high = start_after
        self.gaps: dict[int, float] = {}

    @property
    def cursor(self) -> int:
        return min(self.gaps) - 1 if self.gaps else self.high

    def read(self, now: float | None = None) -> tuple[list[Event], bool]:
        """Return new events (and whether more are waiting beyond this batch)."""
        now = time.monotonic() if now is None else now
        with connection.cursor() as cur:
            cur.execute(NEW_EVENTS_SQL, [self.high, EVENT_BATCH])
            rows = cur.fetchall()
            if self.gaps:
                cur.execute(GAP_EVENTS_SQL, [list(self.gaps)])
                late = cur.fetchall()
            else:
                late = []
        for row in late:
            self.gaps.pop(row[0], None)
        self.track_gaps([row[0] for row in rows], now)
        self.gaps = {i: seen for i, seen in self.gaps.items() if now - seen < GAP_SECONDS}
        events = [Event(*row) for row in late + rows]
        return events, len(rows) == EVENT_BATCH

    def track_gaps(self, ids: list[int], now: float) -> None:
        expected = self.high + 1
        for event_id in ids:
            if event_id > expected and len(self.gaps) < MAX_GAPS:
                self.gaps.update(dict.fromkeys(range(expected, min(event_id, expected + MAX_GAPS)), now))
            expected = event_id + 1
        if ids:
            self.high = ids[-1]


def last_event_id() -> int:
    with connection.cursor() as cur:
        cur.execute(f"SELECT coalesce(max(id), 0) FROM {EVENTS}")
        return int(cur.fetchone()[0])


def rows(sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    with connection.cursor() as cur:
        cur.execute(sql, params or [])
        found: list[tuple[Any, ...]] = cur.fetchall()
        return found


class WorkflowRow(TypedDict):
    """A workflow as the overview lists it (a row of Workflow.objects.values())."""

    id: int
    slug: str
    title: str
    paused: bool
    active_version_id: int | None
    active_version__number: int | None


def workflows() -> list[WorkflowRow]:
    # cast: the stubs type values() rows of a nullable foreign key as int, not int | None.
    return cast(
        list[WorkflowRow],
        list(
            Workflow.objects.order_by("slug").values(
                "id", "slug", "title", "paused", "active_version_id", "active_version__number"
            )
        ),
    )


def queues_and_roster() -> dict[str, Any]:
    """Queue depths, the workers' roster (name -> time of last beat) and whether RQ's
    workers are suspended (paused), in one round trip."""
    queues = settings.SWITCHYARD_QUEUES
    pipe = bus.client().pipeline(transaction=False)
    for name in queues:
        pipe.llen(rqcompat.queue_key(name))
    pipe.zrange(bus.WORKERS_ROSTER, 0, -1, withscores=True)
    pipe.exists(WORKERS_SUSPENDED)
    replies = pipe.execute()
    depths = dict(zip(queues, replies[:-2], strict=True))
    return {"depths": depths, "roster": replies[-2], "paused": bool(replies[-1])}


def redis_state() -> dict[str, Any]:
    """Queue depths, the workers' roster, scheduler heartbeats and the notice backlog."""
    return {**queues_and_roster(), "schedulers": schedulers(), "notices": notice_backlog()}


def schedulers() -> list[dict[str, Any]]:
    client = bus.client()
    keys = sorted(client.scan_iter(bus.scheduler_key("*"), count=1000))
    if not keys:
        return []
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.get(key)
        pipe.pttl(key)
    replies = pipe.execute()
    found = []
    for key, value, ttl in zip(keys, replies[::2], replies[1::2], strict=True):
        if value is not None:
            fields = json.loads(value)
            found.append({"name": key.removeprefix(bus.scheduler_key("")), "ttl_ms": ttl, **fields})
    return found


class Backlog(TypedDict):
    """The scheduler notices not read yet, and the age of the oldest in seconds."""

    count: int
    age_seconds: float


def notice_backlog() -> Backlog:
    """Return the notices no scheduler has read yet, and the age of the oldest (seconds)."""
    client = bus.client()
    try:
        groups = client.xinfo_groups(bus.NOTICES)
    except redis.ResponseError:  # no stream yet (no scheduler ever started): no backlog
        return {"count": 0, "age_seconds": 0.0}
    group = next((g for g in groups if g["name"] == bus.GROUP), None)
    if group is None:
        return {"count": 0, "age_seconds": 0.0}
    oldest = cast(
        list[bus.StreamEntry], client.xrange(bus.NOTICES, f"({group['last-delivered-id']}", "+", count=1)
    )
    if not oldest:
        return {"count": 0, "age_seconds": 0.0}
    age = max(0.0, time.time() - int(oldest[0][0].split("-")[0]) / 1000)
    return {"count": int(group.get("lag") or 1), "age_seconds": round(age, 3)}


def rq_workers() -> list[dict[str, Any]]:
    """Every worker RQ knows of: its queues, state, RQ's heartbeat, and what it has done.

    The counts (node attempts run and failed, the last minute's rate) are those the worker
    publishes with its own heartbeat (runtime/tally.py); RQ's job counts cover the other
    jobs (webhook deliveries), which go through RQ's full path.
    """
    conn = django_rq.get_connection(settings.SWITCHYARD_QUEUES[0])
    found = []
    rq_found = Worker.all(connection=conn)
    beats = worker_beats([w.name for w in rq_found])
    drained = workers.drained([w.name for w in rq_found])
    for worker in rq_found:
        beat = beats.get(worker.name, {})
        found.append(
            {
                "name": worker.name,
                "queues": worker.queue_names(),
                "state": str(worker.get_state()),
                "birth": worker.birth_date.timestamp() if worker.birth_date else None,
                "rq_heartbeat": worker.last_heartbeat.timestamp() if worker.last_heartbeat else None,
                "processed": beat.get("processed", 0) + worker.successful_job_count,
                "failed": beat.get("failed", 0) + worker.failed_job_count,
                "per_second": beat.get("per_second", 0.0),
                "drained": worker.name in drained,
                "slots": beat.get("slots", 0),  # runtime/slots.py: 0 for a worker without slots
                "slots_used": beat.get("slots_used", 0),
            }
        )
    return found


def worker_beats(names: list[str]) -> dict[str, dict[str, Any]]:
    """What each worker published with its last beat (runtime/worker.beat), by name."""
    if not names:
        return {}
    values = bus.client().mget([bus.worker_key(n) for n in names])
    return {name: json.loads(v) for name, v in zip(names, values, strict=True) if v}
