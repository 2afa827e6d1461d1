"""What people do to workers: drain one (finish its job, take no new one) or pause them all.

A drain is a Redis key the worker reads with its heartbeat (runtime/worker.py); pausing is
RQ's own suspension, so `rq suspend` / `rq resume` and these buttons agree. Both are
audited; neither touches Postgres state of runs: a drained or paused worker's queued jobs
wait in Redis and are taken by the other workers.
"""

from __future__ import annotations

from typing import Any

import django_rq
from django.conf import settings
from rq.suspension import is_suspended, resume, suspend

from workflows.runtime import bus
from workflows.store import audit
from workflows.store.errors import NotFound

DRAIN_TTL_SECONDS = 7 * 86400  # a forgotten drain ends by itself after a week


def connection() -> Any:
    return django_rq.get_connection(settings.SWITCHYARD_QUEUES[0])


def check_known(name: str) -> None:
    if bus.client().zscore(bus.WORKERS_ROSTER, name) is None:
        raise NotFound(f"No worker named {name!r} has reported: see the workers page for their names.")


def drain_worker(name: str, actor: Any = None) -> None:
    """Ask a worker to finish what it holds and take no new job until `undrain_worker`."""
    check_known(name)
    bus.client().set(bus.drain_key(name), "1", ex=DRAIN_TTL_SECONDS)
    audit.record_about(actor, "worker.drain", "worker", name)


def undrain_worker(name: str, actor: Any = None) -> None:
    """Let a drained worker take jobs again."""
    bus.client().delete(bus.drain_key(name))
    audit.record_about(actor, "worker.undrain", "worker", name)


def drained(names: list[str]) -> set[str]:
    """The workers among `names` that are asked to drain (one round trip)."""
    pipe = bus.client().pipeline(transaction=False)
    for name in names:
        pipe.exists(bus.drain_key(name))
    return {name for name, on in zip(names, pipe.execute(), strict=True) if on}


def pause_workers(actor: Any = None) -> None:
    """Hold every worker before its next job (RQ's suspension)."""
    suspend(connection())
    audit.record_about(actor, "workers.pause", "workers", "all")


def resume_workers(actor: Any = None) -> None:
    resume(connection())
    audit.record_about(actor, "workers.resume", "workers", "all")


def are_paused() -> bool:
    return bool(is_suspended(connection()))
