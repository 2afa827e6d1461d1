"""Retention: finished runs past their workflow's age are deleted whole, in small batches.

What goes with a run: its node runs (outputs, errors, tracebacks), its history and spans
(run events), its waits, and its dead letters once handled. What stays: a run with an open
dead letter (kept until someone replays or discards it), every unfinished run, the audit
trail (it names runs by id), workflows and versions. An idempotency key is honoured as long
as its run is kept.

The age is SWITCHYARD["RETENTION_DAYS"] (default 30; 0 keeps everything), overridden per
workflow by `Workflow.retention_days` (0 keeps that workflow's runs for ever). A scheduler
calls `prune` every PRUNE_EVERY_SECONDS under a PostgreSQL advisory lock, so one scheduler
prunes at a time; each batch of BATCH runs is its own short transaction and one call does at
most MAX_BATCHES, so pruning never holds the runtime's rows or its loop for long (a backlog
of old runs is worked off over successive calls). Admins see the settings, each workflow's
age and the tables' sizes on the Retention page (/retention/). Events published to topics
are deleted at the default age too (workflows/events/archive.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from workflows.events import archive
from workflows.store import audit
from workflows.store.errors import Invalid
from workflows.store.models import Run, Workflow
from workflows.store.statements import DEAD_LETTERS, RUNS, WORKFLOWS

log = logging.getLogger(__name__)
PRUNE_EVERY_SECONDS = 60.0
BATCH = 200
MAX_BATCHES = 10
LOCK_KEY = 0x5357_5245  # pg_try_advisory_xact_lock key: "SWRE"
MAX_DAYS = 36500

EXPIRED_SQL = f"""
SELECT r.id FROM {RUNS} r JOIN {WORKFLOWS} w ON w.id = r.workflow_id
WHERE r.finished_at IS NOT NULL
  AND coalesce(w.retention_days, %(default)s) > 0
  AND r.finished_at < now() - coalesce(w.retention_days, %(default)s) * interval '1 day'
  AND NOT EXISTS (SELECT 1 FROM {DEAD_LETTERS} d WHERE d.run_id = r.id AND d.status = 'open')
ORDER BY r.finished_at
LIMIT %(limit)s
"""

SIZES_SQL = """
SELECT c.relname, pg_total_relation_size(c.oid), pg_indexes_size(c.oid), c.reltuples::bigint
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relkind = 'r' AND c.relname LIKE 'workflows\\_%%'
ORDER BY pg_total_relation_size(c.oid) DESC
"""


def default_days() -> float:
    return float(settings.SWITCHYARD["RETENTION_DAYS"])


def prune(batches: int = MAX_BATCHES) -> int:
    """Delete up to `batches` batches of expired runs; return how many runs went.

    Returns 0 at once when another scheduler holds the pruning lock.
    """
    pruned = 0
    for _ in range(batches):
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute("SELECT pg_try_advisory_xact_lock(%s)", [LOCK_KEY])
            if not cur.fetchone()[0]:
                return pruned
            cur.execute(EXPIRED_SQL, {"default": default_days(), "limit": BATCH})
            ids = [row[0] for row in cur.fetchall()]
            if ids:
                Run.objects.filter(pk__in=ids).delete()
        pruned += len(ids)
        if len(ids) < BATCH:
            break
    return pruned


def set_workflow_days(workflow: Workflow, days: int | None, user: Any = None) -> None:
    """Override a workflow's retention (None: the default; 0: keep for ever)."""
    if days is not None and not 0 <= days <= MAX_DAYS:
        raise Invalid(f"retention_days: {days} is out of range; give 0 (keep for ever) to {MAX_DAYS} days.")
    with transaction.atomic():
        Workflow.objects.filter(pk=workflow.pk).update(retention_days=days)
        audit.record(user, "workflow.retention", workflow, retention_days=days)
    workflow.retention_days = days


@dataclass(frozen=True)
class TableSize:
    name: str
    total_bytes: int
    index_bytes: int
    rows: int


def table_sizes() -> list[TableSize]:
    """The project's tables, largest first (rows are PostgreSQL's estimate)."""
    with connection.cursor() as cur:
        cur.execute(SIZES_SQL)
        return [TableSize(name, total, index, max(rows, 0)) for name, total, index, rows in cur.fetchall()]


def prune_and_report() -> int:
    """Prune (the scheduler's duty), saying in the log when runs and kept events went."""
    if pruned := prune():
        log.info("retention: deleted %d finished runs past their age", pruned)
    if events := archive.prune_events():
        log.info("retention: deleted %d published events past their age", events)
    return pruned
