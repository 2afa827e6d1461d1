"""Health: liveness (the process answers) and readiness (it can do useful work)."""

from __future__ import annotations

import time
from collections.abc import Callable

import redis
from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpResponse

from workflows.api.routing import Call, render
from workflows.api.serializers import CheckOut
from workflows.runtime import bus


def live(call: Call) -> HttpResponse:
    """Answer 200 while this web process serves requests (checks nothing else)."""
    return render({"status": "ok", "checks": {}})


def ready(call: Call) -> HttpResponse:
    """Answer 200 when PostgreSQL and Redis answer and a scheduler and a worker are alive; else 503."""
    checks = {
        "postgres": check(postgres),
        "redis": check(lambda: f"PING {bus.client().ping()}"),
        "scheduler": check(lambda: heartbeats("sy:scheduler:*", "scheduler")),
        "worker": check(workers),
    }
    ok = all(c["ok"] for c in checks.values())
    return render({"status": "ok" if ok else "unavailable", "checks": checks}, 200 if ok else 503)


def check(probe: Callable[[], str]) -> CheckOut:
    started = time.monotonic()
    try:
        detail = probe()
    except (DatabaseError, redis.RedisError, LookupError) as exc:
        return {"ok": False, "detail": f"{type(exc).__name__}: {exc}"[:300]}
    return {"ok": True, "detail": f"{detail} ({(time.monotonic() - started) * 1000:.1f} ms)"}


def postgres() -> str:
    with connection.cursor() as cur:
        cur.execute("SELECT 1")
        cur.fetchone()
    return "SELECT 1"


def workers() -> str:
    alive = bus.live_workers(settings.SWITCHYARD["WORKER_LOST_AFTER_SECONDS"])
    if not alive:
        raise LookupError("no worker heartbeat in Redis: start one (manage.py rqworker)")
    return f"{len(alive)} alive"


def heartbeats(pattern: str, what: str) -> str:
    alive = sum(1 for _ in bus.client().scan_iter(pattern, count=1000))
    if not alive:
        raise LookupError(f"no {what} heartbeat in Redis ({pattern}): start one (manage.py runscheduler)")
    return f"{alive} alive"
