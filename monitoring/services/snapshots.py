"""What each topic shows: plain dicts built from sources and windows, rendered by templates.

The broadcaster builds them every tick; a page's first load and a client's re-sync read the
last one the broadcaster sent (`current`), or, when no broadcaster is running, one built on
the spot without the rolling windows (marked `live: False`, and the page says so).
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

from django.conf import settings

from monitoring.services import counters, sources
from monitoring.services.stats import Windows

BACKLOG_WARN = 100  # jobs in a queue before a growing backlog is worth a warning
STALE_AFTER_SECONDS = 5.0


def group_in_flight(rows: list[tuple[Any, ...]]) -> dict[int, dict[str, dict[str, int]]]:
    """(workflow, node, status, n) rows -> workflow -> node -> status -> n."""
    grouped: dict[int, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(dict))
    for workflow_id, node_id, status, n in rows:
        grouped[workflow_id][node_id][status] = n
    return grouped


def alive_workers(roster: list[tuple[str, float]], now: float) -> list[tuple[str, float]]:
    ttl = settings.SWITCHYARD["WORKER_LOST_AFTER_SECONDS"]
    return [(name, now - beat) for name, beat in roster if now - beat <= ttl]


def queue_rows(
    depths: dict[str, int], history: list[tuple[float, dict[str, int]]], now: float
) -> list[dict[str, Any]]:
    """Each queue's depth and its change over the last ~10 s (history is oldest first)."""
    before = next((d for t, d in history if now - t <= 10.5), depths) if history else depths
    found = []
    for name, depth in depths.items():
        change = depth - before.get(name, depth)
        found.append(
            {"name": name, "depth": depth, "change": change, "growing": depth > BACKLOG_WARN and change > 0}
        )
    return found


def warnings(
    workers: int, schedulers: int, queues: list[dict[str, Any]], notices: sources.Backlog
) -> list[str]:
    found = []
    if workers == 0:
        found.append("No worker is alive: queued nodes will not run. Start workers (manage.py rqworker).")
    if schedulers == 0:
        found.append("No scheduler is alive: finished nodes start nothing new. Start manage.py runscheduler.")
    for q in queues:
        if q["growing"]:
            found.append(
                f"Backlog of queue {q['name']} is growing: {q['depth']} jobs (+{q['change']} in 10 s). "
                "Add workers or look for a slow handler."
            )
    if notices["age_seconds"] > 5:
        found.append(
            f"Schedulers are {notices['age_seconds']:.0f} s behind ({notices['count']} notices unread)."
        )
    return found


def build_overview(
    now: float,
    workflows: list[sources.WorkflowRow],
    windows: Windows | None,
    in_flight: dict[int, dict[str, dict[str, int]]],
    runs_in_flight: list[tuple[Any, ...]],
    letters: dict[int, int],
    redis_state: dict[str, Any],
    history: list[tuple[float, dict[str, int]]],
) -> dict[str, Any]:
    runs: dict[int, dict[str, int]] = defaultdict(dict)
    for workflow_id, status, n in runs_in_flight:
        runs[workflow_id][status] = n
    rows: list[dict[str, Any]] = []
    for wf in workflows:
        nodes = in_flight.get(wf["id"], {})
        counts = windows.run_counts(wf["id"], now) if windows else {}
        rows.append(
            {
                "id": wf["id"],
                "slug": wf["slug"],
                "title": wf["title"],
                "paused": wf["paused"],
                "version": wf["active_version__number"],
                "running": runs[wf["id"]].get("running", 0),
                "waiting": runs[wf["id"]].get("waiting", 0),
                "nodes_queued": sum(s.get("queued", 0) for s in nodes.values()),
                "nodes_running": sum(s.get("running", 0) for s in nodes.values()),
                "dead_letters": letters.get(wf["id"], 0),
                **counts,
            }
        )
    queues = queue_rows(redis_state["depths"], history, now)
    workers = len(alive_workers(redis_state["roster"], time.time()))
    schedulers = len(redis_state["schedulers"])
    rate = windows.rate_series(now) if windows else []
    waits = redis_state.get("waits", {})
    return {
        "live": windows is not None,
        "at": now,
        "workflows": rows,
        "queues": queues,
        "workers_alive": workers,
        "schedulers_alive": schedulers,
        "dead_letters_open": sum(letters.values()),
        "runs_in_flight": sum(r["running"] + r["waiting"] for r in rows),
        "nodes_waiting": sum(waits.values()),
        "approvals_pending": waits.get("human.approval", 0),
        "rate": rate,
        "rate_now": rate[-1] if rate else None,
        "notices": redis_state["notices"],
        "warnings": warnings(workers, schedulers, queues, redis_state["notices"]),
    }


def build_workflow(
    workflow_id: int, windows: Windows | None, in_flight: dict[int, dict[str, dict[str, int]]], now: float
) -> dict[str, Any]:
    """Node id -> in-flight counts by status, recent outcomes and p50/p95 duration."""
    stats = windows.node_stats(workflow_id, now) if windows else {}
    flying = in_flight.get(workflow_id, {})
    nodes = {}
    for node_id in set(stats) | set(flying):
        counts = flying.get(node_id, {})
        nodes[node_id] = {
            "queued": counts.get("queued", 0),
            "running": counts.get("running", 0),
            "retrying": counts.get("retrying", 0) + counts.get("failed", 0),
            **stats.get(node_id, {"succeeded": 0, "failed": 0, "p50_ms": None, "p95_ms": None}),
        }
    return {"live": windows is not None, "at": now, "workflow": workflow_id, "nodes": nodes}


def build_workers(
    now: float,
    redis_state: dict[str, Any],
    rq_workers: list[dict[str, Any]],
    running: list[tuple[Any, ...]],
    queues: list[dict[str, Any]],
) -> dict[str, Any]:
    alive = dict(alive_workers(redis_state["roster"], time.time()))
    info = {w["name"]: w for w in rq_workers}
    attempts: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for worker, run_id, node_id, attempt, started in running:
        attempts[worker].append(
            {"run": run_id, "node": node_id, "attempt": attempt, "for_s": round(now - started, 1)}
        )
    rows = []
    for name in sorted(set(alive) | set(info)):
        rq = info.get(name, {})
        rows.append(
            {
                "name": name,
                "alive": name in alive,
                "beat_age": round(alive[name], 1) if name in alive else None,
                "queues": rq.get("queues", []),
                "state": rq.get("state", "unknown"),
                "running": attempts.get(name, [])[:5],
                "running_count": len(attempts.get(name, [])),
                "processed": rq.get("processed", 0),
                "failed": rq.get("failed", 0),
                "per_second": rq.get("per_second", 0.0),
                "uptime_s": round(now - rq["birth"]) if rq.get("birth") else None,
                "drained": rq.get("drained", False),
                "slots": rq.get("slots", 0),
                "slots_used": rq.get("slots_used", 0),
            }
        )
    schedulers = [
        {
            "name": s["name"],
            "pid": s.get("pid"),
            "versions": len(s.get("active_versions", {})),
            "workers": s.get("workers"),
            "expires_in": round(s["ttl_ms"] / 1000, 1),
        }
        for s in redis_state["schedulers"]
    ]
    return {
        "live": True,
        "at": now,
        "workers": rows,
        "schedulers": schedulers,
        "queues": queues,
        "notices": redis_state["notices"],
        "paused": redis_state.get("paused", False),
    }


def current(topic: str) -> dict[str, Any]:
    """Return the topic's last broadcast message, or one built now without windows."""
    message = counters.latest(topic)
    tick = counters.last_tick()  # an unchanged topic is re-sent only every few seconds
    if message is not None and tick is not None and time.time() - tick < STALE_AFTER_SECONDS:
        return message
    return {"topic": topic, "epoch": 0, "seq": 0, "data": build_now(topic)}


def build_now(topic: str) -> dict[str, Any]:
    """Build a topic's snapshot from the sources alone (no broadcaster running)."""
    now = time.time()
    in_flight = group_in_flight(sources.rows(sources.IN_FLIGHT_SQL))
    if topic.startswith("workflow:"):
        return build_workflow(int(topic.split(":", 1)[1]), None, in_flight, now)
    state = sources.redis_state()
    if topic == "workers":
        queues = queue_rows(state["depths"], [], now)
        return build_workers(
            now, state, sources.rq_workers(), sources.rows(sources.RUNNING_ATTEMPTS_SQL), queues
        )
    letters = dict(sources.rows(sources.OPEN_LETTERS_SQL))
    runs = sources.rows(sources.RUNS_IN_FLIGHT_SQL)
    state["waits"] = dict(sources.rows(sources.OPEN_WAITS_SQL))
    return build_overview(now, sources.workflows(), None, in_flight, runs, letters, state, [])
