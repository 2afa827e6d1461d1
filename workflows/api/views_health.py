"""Health and schema: liveness, readiness, this OpenAPI document and the docs page."""

from __future__ import annotations

import time
from collections.abc import Callable

import redis
from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse
from ninja import Router, Status

from workflows.api.serializers import CheckOut, HealthOut
from workflows.runtime import bus, outages

router = Router(tags=["health and schema"])


@router.get("/health/live", response=HealthOut, summary="Liveness")
def live(request: HttpRequest) -> HealthOut:
    """Answer 200 while this web process serves requests (checks nothing else)."""
    return {"status": "ok", "checks": {}}


@router.get("/health/ready", response={200: HealthOut, 503: HealthOut}, summary="Readiness")
def ready(request: HttpRequest, response: HttpResponse) -> Status[HealthOut]:
    """Answer 200 when PostgreSQL and Redis answer and a scheduler and a worker are alive; else 503,
    with the Retry-After every other 503 of the API carries."""
    checks = {
        "postgres": check(postgres),
        "redis": check(lambda: f"PING {bus.client().ping()}"),
        "scheduler": check(lambda: heartbeats("sy:scheduler:*", "scheduler")),
        "worker": check(workers),
    }
    ok = all(c["ok"] for c in checks.values())
    if not ok:
        response["Retry-After"] = str(outages.RETRY_AFTER_SECONDS)
    return Status(200 if ok else 503, {"status": "ok" if ok else "unavailable", "checks": checks})


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
