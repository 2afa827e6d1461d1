"""Debounce and singleton: a workflow's keyed starts (`debounce`, `singleton`; core/flowcontrol.py).

Decided here (docs/authors/flow-control.md says it for authors):
- **debounce** `{key, window_s}`: a start is written as a *waiting* run that starts when its
  window ends. A later start with the same key value inside the window replaces it: the
  earlier waiting run is cancelled with the reason "debounced: replaced by run N" and the new
  one waits a whole window again (trailing edge, as Inngest's debounce; the last input
  wins). A start after the window (the earlier run started already) waits its own window.
- **singleton** `{key, mode}`: one active run per key value (waiting, running or
  compensating). `skip`: a start while one is active starts nothing and is refused with 409
  naming the active run (`SingletonActive`; a batch answers that run with created=false).
  `queue`: the start is written as a waiting run, started when no run of its key is running,
  oldest first.
- Both on one workflow are refused when saved: a debounced run is already one per key.

The deferred runs are started by a duty of the schedulers (`start_deferred`, under the
reconciler's lock), from PostgreSQL alone: a scheduler killed mid-way loses no start.
Concurrent starts of one key are serialised by an advisory lock per (workflow, key).
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any

import redis
from django.db import connection, transaction

from workflows.core.definition import Issue
from workflows.core.flowcontrol import StartKey, resolve_key
from workflows.core.graph import Graph
from workflows.core.states import RunStatus
from workflows.runtime import bus, transitions
from workflows.store.errors import Conflict
from workflows.store.history import event, record_events
from workflows.store.statements import RUNS, WORKFLOWS

log = logging.getLogger(__name__)

DEFERRED_SECONDS = 0.25  # how often the schedulers start deferred runs whose turn came

ACTIVE = (RunStatus.WAITING, RunStatus.RUNNING, RunStatus.COMPENSATING)
LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtextextended('sy:start:' || %s || ':' || %s, 0))"

# Debounced runs whose window ended; the oldest singleton-queued run of each key none of
# whose runs is running. Never the runs of a paused workflow: its resume starts them.
DUE_SQL = f"""
SELECT r.id FROM {RUNS} r JOIN {WORKFLOWS} w ON w.id = r.workflow_id
WHERE r.status = '{RunStatus.WAITING}' AND r.start_key IS NOT NULL AND NOT w.paused
  AND CASE WHEN r.start_due_at IS NOT NULL THEN r.start_due_at <= now()
      ELSE NOT EXISTS (
          SELECT FROM {RUNS} o WHERE o.workflow_id = r.workflow_id AND o.start_key = r.start_key
            AND o.status IN ('{RunStatus.RUNNING}', '{RunStatus.COMPENSATING}'))
       AND r.id = (
          SELECT min(q.id) FROM {RUNS} q WHERE q.workflow_id = r.workflow_id AND q.start_key = r.start_key
            AND q.status = '{RunStatus.WAITING}' AND q.start_due_at IS NULL)
      END
ORDER BY r.id LIMIT %(limit)s
"""


class SingletonActive(Conflict):
    """A singleton start (mode skip) while a run of its key is active; `run_id` names it."""

    def __init__(self, message: str, run_id: int) -> None:
        super().__init__(message, [Issue("singleton.key", message, "singleton_active")])
        self.run_id = run_id


@dataclass(frozen=True)
class KeyedStart:
    """How a keyed start is written: its key value, whether it waits, until when."""

    key: str
    hold: bool
    due_at: dt.datetime | None = None
    replaces: tuple[int, ...] = ()  # debounce: the waiting runs it cancels


def start_key_of(graph: Graph) -> StartKey | None:
    return graph.debounce or graph.singleton


def plan(workflow_id: int, graph: Graph, run_input: Any, now: dt.datetime) -> KeyedStart:
    """Lock the start's key and decide how it is written; raise SingletonActive to skip it.

    Call it inside the transaction that writes the run.
    """
    spec = start_key_of(graph)
    assert spec is not None, "plan() is for workflows that declare debounce or singleton"
    key = resolve_key(spec.key, run_input, {}, spec.default)
    with connection.cursor() as cur:
        cur.execute(LOCK_SQL, [str(workflow_id), key])
    active = active_runs(workflow_id, key)
    if graph.debounce is not None:
        waiting = tuple(run_id for run_id, status, due in active if status == RunStatus.WAITING and due)
        return KeyedStart(key, True, now + dt.timedelta(seconds=spec.window_s), waiting)
    if not active:
        return KeyedStart(key, False)
    if spec.mode == "skip":
        run_id = active[0][0]
        raise SingletonActive(
            f"A run of this workflow with singleton key {key!r} is already active (run {run_id}); "
            "nothing was started. Wait for it to end, or cancel it.",
            run_id,
        )
    return KeyedStart(key, True)


def active_runs(workflow_id: int, key: str) -> list[tuple[int, str, dt.datetime | None]]:
    """(id, status, start due) of the active runs of a key, oldest first."""
    from workflows.store.models import Run  # noqa: PLC0415  (models import apps at load)

    rows = Run.objects.filter(workflow_id=workflow_id, start_key=key, status__in=ACTIVE).order_by("id")
    return list(rows.values_list("id", "status", "start_due_at"))


def start_deferred(limit: int = 500) -> int:
    """Start the deferred runs whose turn came (a duty); return how many started."""
    with connection.cursor() as cur:
        cur.execute(DUE_SQL, {"limit": limit})
        due = [row[0] for row in cur.fetchall()]
    if not due:
        return 0
    with transaction.atomic():
        started = transitions.resume_runs(due)
        record_events(*(event("run.started", run_id) for run_id in due))
    try:
        bus.notify(due, [])
    except redis.RedisError:
        log.warning("runs %s started; notice not sent, the reconciler will re-drive them", due)
    return started
