"""Re-drive runs from Postgres when a message, a job or a process was lost.

Three checks, each cheap and each safe to run at any time (every change is conditional):
- queued attempts whose RQ job is gone (Redis restarted empty, or enqueue failed after the
  commit) are enqueued again, same attempt;
- running attempts whose worker stopped heart-beating (kill -9, OOM, host lost), or that
  never reported long after their timeout, are failed, so the engine retries them
  elsewhere or files a dead letter; an attempt lost with its worker does not count against
  the node's retry policy (up to FREE_LOST_ATTEMPTS times, transitions.LOST_SQL);
- running runs with nothing in flight and no recent progress (a notice was lost: scheduler
  killed mid-batch, stream flushed) are advanced again; a node held by its concurrency cap
  counts as in flight (the schedulers' housekeeping offers it again, capacity.py).
Only one scheduler reconciles at a time (a Redis lock); any of them can.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from workflows.core.compensation import step_node
from workflows.core.states import NodeStatus as N, RunStatus as R
from workflows.runtime import bus, jobs, mapping, transitions
from workflows.runtime.advancing import advance_compensations, advance_runs
from workflows.runtime.transitions import Lost
from workflows.store.graphs import load_graph
from workflows.store.history import event
from workflows.store.models import NodeRun, RunEvent
from workflows.store.statements import NODES, RUNS

SCAN_LIMIT = 2000
OVERDUE_GRACE_SECONDS = 30

STALLED_RUNS_SQL = f"""
SELECT r.id FROM {RUNS} r
WHERE r.status = '{R.RUNNING}' AND r.waiting_nodes = 0  -- run_stall_candidates_idx
  AND r.created_at < now() - %(after)s * interval '1 second'
  AND NOT EXISTS (
    SELECT 1 FROM {NODES} n WHERE n.run_id = r.id AND (
      n.status IN ('{N.QUEUED}', '{N.RUNNING}', '{N.RETRYING}', '{N.WAITING}')  -- waiting: on a person, an event, a deadline
      OR (n.status = '{N.PENDING}' AND n.due_at IS NOT NULL)  -- held by a cap: housekeeping's
      OR n.finished_at > now() - %(after)s * interval '1 second'))
ORDER BY r.id LIMIT %(limit)s
"""

# Statuses spelled out, not parameters: the partial index serves generic plans (pgsession).
QUEUED_BEFORE_SQL = f"""
SELECT n.id, n.attempt, n.job_id, n.queue, n.node_id, r.version_id
FROM {NODES} n JOIN {RUNS} r ON r.id = n.run_id
WHERE n.status = '{N.QUEUED}' AND n.queued_at < %(cutoff)s
LIMIT %(limit)s
"""

RUNNING_BEFORE_SQL = f"""
SELECT n.id, n.attempt, n.worker, n.node_id, r.version_id, n.started_at
FROM {NODES} n JOIN {RUNS} r ON r.id = n.run_id
WHERE n.status = '{N.RUNNING}' AND n.started_at < %(cutoff)s
LIMIT %(limit)s
"""


class Reconciler:
    def __init__(self) -> None:
        self.missing_since: dict[str, float] = {}
        self.job_seen_at: dict[str, float] = {}  # job id -> when Redis last confirmed it

    def run(self, workers: int) -> dict[str, int]:
        """Do the three checks once; return what each one repaired."""
        return {
            "requeued": self.requeue_lost_jobs(workers),
            "lost": self.fail_lost_attempts(),
            "redriven": self.redrive_stalled_runs(workers),
            **mapping.reconcile(workers, self.dead_workers),
            "compensations": self.redrive_compensations(workers),
        }

    def requeue_lost_jobs(self, workers: int) -> int:
        """Enqueue again the queued attempts whose job no longer waits in its queue.

        Lost: Redis lost it, or a worker took it and died before claiming its attempts (a
        live worker claims within milliseconds of taking), or before storing the results of
        a direct job (batchable steps: milliseconds too; one that outlasts the window runs
        again, and the first result stored wins). A job confirmed waiting is asked
        about again only after a reconcile window, so a long backlog costs one LPOS per job
        per window, not per second.
        """
        after = settings.SWITCHYARD["RECONCILE_AFTER_SECONDS"]
        cutoff = timezone.now() - timedelta(seconds=after)
        rows = scan(QUEUED_BEFORE_SQL, cutoff)
        now = time.monotonic()
        queued = {row[2]: row[3] for row in rows}  # a batched job holds many attempts: ask once
        self.job_seen_at = {j: t for j, t in self.job_seen_at.items() if j in queued and now - t < after}
        job_ids = sorted(queued.keys() - self.job_seen_at.keys())
        missing = set()
        waiting = jobs.jobs_waiting([(job_id, queued[job_id]) for job_id in job_ids])
        for job_id, ok in zip(job_ids, waiting, strict=True):
            if ok:
                self.job_seen_at[job_id] = now
            else:
                missing.add(job_id)
        return jobs.requeue(
            [
                (jobs.ready(i, load_graph(version_id), node_id), attempt)
                for i, attempt, job_id, _, node_id, version_id in rows
                if job_id in missing
            ],
            workers,
        )

    def fail_lost_attempts(self) -> int:
        """Fail running attempts whose worker died, or that overran their timeout unreported."""
        now = timezone.now()
        cutoff = now - timedelta(seconds=settings.SWITCHYARD["WORKER_LOST_AFTER_SECONDS"])
        rows = scan(RUNNING_BEFORE_SQL, cutoff)
        dead = self.dead_workers(sorted({row[2] for row in rows}))
        lost: list[Lost] = []
        for noderun_id, attempt, worker, node_id, version_id, started_at in rows:
            timeout = step_node(load_graph(version_id), node_id).timeout_seconds
            if worker in dead:
                lost.append(
                    Lost(
                        noderun_id,
                        attempt,
                        f"Worker {worker} stopped heart-beating during attempt {attempt}.",
                    )
                )
            elif started_at + timedelta(seconds=timeout + OVERDUE_GRACE_SECONDS) < now:
                reason = f"Attempt {attempt} on {worker} never reported, {timeout:g} s timeout long past."
                lost.append(Lost(noderun_id, attempt, reason, free=False))  # a hang: it counts
        return self.fail_attempts(lost) if lost else 0

    def fail_attempts(self, lost: list[Lost]) -> int:
        with transaction.atomic():
            failed = transitions.fail_lost(lost)
            RunEvent.objects.bulk_create(
                event("node.lost", run_id, node_id, attempt, {"worker": w})
                for run_id, node_id, attempt, w in failed
            )
        bus.notify({run_id for run_id, *_ in failed})
        return len(failed)

    def dead_workers(self, names: list[str]) -> set[str]:
        """Return the workers missing on two looks at least a second apart.

        One missing heartbeat can be a flushed Redis that the worker refills within a beat.
        """
        now = time.monotonic()
        alive = dict(zip(names, bus.alive([bus.worker_key(n) for n in names]), strict=True))
        for name, ok in alive.items():
            if ok:
                self.missing_since.pop(name, None)
            else:
                self.missing_since.setdefault(name, now)
        return {n for n, ok in alive.items() if not ok and now - self.missing_since[n] >= 1.0}

    def redrive_stalled_runs(self, workers: int) -> int:
        after = settings.SWITCHYARD["RECONCILE_AFTER_SECONDS"]
        with connection.cursor() as cur:
            cur.execute(STALLED_RUNS_SQL, {"after": after, "limit": SCAN_LIMIT})
            run_ids = [row[0] for row in cur.fetchall()]
        advance_runs(run_ids, workers)
        return len(run_ids)

    def redrive_compensations(self, workers: int) -> int:
        """Advance compensating runs with no step in flight and no recent progress (a lost notice)."""
        after = settings.SWITCHYARD["RECONCILE_AFTER_SECONDS"]
        with connection.cursor() as cur:
            cur.execute(STALLED_COMPENSATIONS_SQL, {"after": after, "limit": SCAN_LIMIT})
            run_ids = [row[0] for row in cur.fetchall()]
        advance_compensations(run_ids, workers)
        return len(run_ids)


# Compensating runs are few and short-lived; a partial index holds only them (run_compensating_idx).
STALLED_COMPENSATIONS_SQL = f"""
SELECT r.id FROM {RUNS} r
WHERE r.status = '{R.COMPENSATING}'
  AND NOT EXISTS (
    SELECT 1 FROM {NODES} n WHERE n.run_id = r.id AND (
      n.status IN ('{N.QUEUED}', '{N.RUNNING}', '{N.RETRYING}')
      OR n.finished_at > now() - %(after)s * interval '1 second'))
ORDER BY r.id LIMIT %(limit)s
"""


def hand_back(worker: str, reason: str) -> int:
    """Fail a stopping worker's running attempts and map items as lost now (retried per
    policy); return how many."""
    rows = NodeRun.objects.filter(worker=worker, status=N.RUNNING).values_list("pk", "attempt")
    lost = [Lost(pk, attempt, reason) for pk, attempt in rows]
    return (Reconciler().fail_attempts(lost) if lost else 0) + mapping.hand_back(worker, reason)


def scan(sql: str, cutoff: datetime) -> list[tuple[Any, ...]]:
    with connection.cursor() as cur:
        cur.execute(sql, {"cutoff": cutoff, "limit": SCAN_LIMIT})
        found: list[tuple[Any, ...]] = cur.fetchall()
        return found
