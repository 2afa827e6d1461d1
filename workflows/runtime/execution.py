"""Execute node attempts inside a worker: claim, run the handlers, store the results, notify.

A worker hands over a batch of attempts (one RQ job, or several popped together). Postgres
sees one statement per batch that claims the attempts and reads their upstream outputs
(relaxed commit, see jobs.RELAXED_COMMIT), then one statement per flush that stores the
results and appends every attempt's span to the run history; Redis sees one XADD per flush.
Batchable attempts come in direct jobs that carry what they are given: they skip the claim
(see run_batch), so an idle hop between two such nodes costs one statement in the worker.
Results are flushed when the batch is done, or earlier once the oldest unflushed result has
waited FLUSH_AFTER_SECONDS, so a long batch never holds back its first nodes' successors.
The result is durable before the scheduler hears of it, so a crash between the two loses
nothing: the reconciler finds the finished node and re-drives its run.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from workflows import handlers
from workflows.core import engine
from workflows.errors import Invalid
from workflows.runs import check_json_size
from workflows.runtime import bus
from workflows.runtime.jobs import RELAXED_COMMIT, Given, Item
from workflows.versions import load_graph

log = logging.getLogger(__name__)


class NodeTimeout(BaseException):
    """Raised in the handler's frame when its attempt runs out of time.

    A BaseException, so that a handler's own `except Exception` cannot swallow it.
    """


@dataclass(frozen=True)
class Claim:
    noderun_id: int
    run_id: int
    node_id: str
    attempt: int
    version_id: int
    input: Any
    direct: bool = False  # from a direct job: never claimed, stored only if still queued


@dataclass(frozen=True)
class Outcome:
    status: str
    output: str | None = None  # JSON text
    error: str = ""
    traceback: str = ""


# Claim the attempts and read their predecessors' outputs in one round trip: rows of kind
# 'claim' carry the run's input, rows of kind 'output' a succeeded upstream node's output.
# `status || ''` keeps the planner off the status indexes, which at rest hold no queued
# node or running run: a plan cached then would scan every queued row under load; these
# statements are driven by primary keys.
CLAIM_SQL = f"""
WITH claimed AS (
    UPDATE workflows_noderun n SET status = 'running', worker = %(worker)s, started_at = now()
    FROM unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS v(id, attempt), workflows_run r, {RELAXED_COMMIT}
    WHERE n.id = ANY(%(ids)s::bigint[]) AND n.id = v.id AND n.attempt = v.attempt AND n.status || '' = 'queued'
      AND r.id = n.run_id AND r.status || '' = 'running'
    RETURNING n.id, n.run_id, n.node_id, n.attempt, r.version_id,
              coalesce(n.input_override, r.input) AS input
)
SELECT 'claim', id, run_id, node_id, attempt, version_id, input FROM claimed
UNION ALL
SELECT 'output', u.id, u.run_id, u.node_id, u.attempt, 0, u.output FROM workflows_noderun u
WHERE u.run_id IN (SELECT run_id FROM claimed) AND u.node_id = ANY(%(upstream)s) AND u.status = 'succeeded'
"""

# The results travel as one JSON document: psycopg adapting ten arrays element by element
# cost the worker more CPU than the rest of the statement (profiled).
FINISH_SQL = """
WITH v AS (
    SELECT * FROM json_to_recordset(%(results)s::json) AS v(
        id bigint, attempt int, status text, output text, error text, traceback text,
        started_at timestamptz, finished_at timestamptz, span json, from_status text
    )
), done AS (
    UPDATE workflows_noderun n
    SET status = v.status, output = v.output::jsonb, error = v.error, traceback = v.traceback,
        started_at = v.started_at, finished_at = v.finished_at, worker = %(worker)s
    FROM v
    WHERE n.id = ANY(%(ids)s::bigint[]) AND n.id = v.id AND n.attempt = v.attempt AND n.status || '' = v.from_status
    RETURNING n.id, n.run_id, n.node_id, n.attempt, n.worker, n.started_at, n.finished_at, n.status, v.span
), history AS (
    INSERT INTO workflows_runevent (run_id, kind, node_id, attempt, at, started_at, worker, data)
    SELECT run_id, 'node.attempt', node_id, attempt, finished_at, started_at, worker, span::jsonb FROM done
)
SELECT DISTINCT 'run', run_id, 0::bigint, '', '', 0, 0::bigint, 0 FROM done
UNION ALL
SELECT 'node', n.id, n.run_id, n.node_id, coalesce(d.status, n.status), n.tries, r.version_id, r.epoch
FROM workflows_run r JOIN workflows_noderun n ON n.run_id = r.id LEFT JOIN done d ON d.id = n.id
WHERE r.id = ANY(%(small_runs)s::bigint[]) AND r.id IN (SELECT run_id FROM done) AND r.status || '' = 'running'
  AND NOT EXISTS (
      SELECT FROM workflows_noderun o
      WHERE o.run_id = r.id AND o.status || '' IN ('queued', 'running') AND o.id NOT IN (SELECT id FROM done)
  )
"""
FLUSH_AFTER_SECONDS = 0.02


@dataclass(frozen=True)
class Result:
    claim: Claim
    outcome: Outcome
    started: datetime
    finished: datetime

    def span(self) -> dict[str, Any]:
        span: dict[str, Any] = {
            "status": self.outcome.status,
            "duration_ms": round((self.finished - self.started).total_seconds() * 1000, 3),
        }
        if self.outcome.error:
            span["error"] = self.outcome.error[:500]
        return span

    def row(self) -> dict[str, Any]:
        """This result as a row of FINISH_SQL's results."""
        return {
            "id": self.claim.noderun_id,
            "attempt": self.claim.attempt,
            "status": self.outcome.status,
            "output": self.outcome.output,
            "error": self.outcome.error,
            "traceback": self.outcome.traceback,
            "started_at": self.started.isoformat(),
            "finished_at": self.finished.isoformat(),
            "span": self.span(),
            "from_status": engine.QUEUED if self.claim.direct else engine.RUNNING,
        }


def from_json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def run_batch(items: list[Item], worker: str, given: Given | None = None) -> int:
    """Execute the claimable attempts among (noderun id, attempt, version id, node id).

    Attempts in `given` come from a direct job (jobs.claim_and_enqueue), which brought what
    they are given: they run without a claim, stay queued meanwhile, and their results are
    stored only if they are still queued at that attempt (a cancel or a newer attempt
    drops them). Return how many ran.
    """
    given = given or {}
    claims, upstream = claim([item for item in items if item[0] not in given], worker)
    claims += given_claims([item for item in items if item[0] in given], given, upstream)
    order = {item[0]: n for n, item in enumerate(items)}
    claims.sort(key=lambda c: order[c.noderun_id])
    results: list[Result] = []
    oldest = 0.0
    for c in claims:
        results.append(Result(c, *execute(c, upstream.get(c.run_id, {}))))
        if len(results) == 1:
            oldest = time.monotonic()
        if time.monotonic() - oldest >= FLUSH_AFTER_SECONDS:
            bus.notify(*finish(results, worker))
            results = []
    if results:
        bus.notify(*finish(results, worker))
    return len(claims)


def claim(items: list[Item], worker: str) -> tuple[list[Claim], dict[int, dict[str, Any]]]:
    """Move queued attempts to running and read what they are given.

    Return the claims (stale, duplicate or cancelled attempts are left out), and run id ->
    {node id: output} of their succeeded predecessors.
    """
    if not items:
        return [], {}
    wanted = {p for _, _, version_id, node_id in items for p in load_graph(version_id).predecessors(node_id)}
    with connection.cursor() as cur:
        cur.execute(
            CLAIM_SQL,
            {
                "worker": worker,
                "ids": [i[0] for i in items],
                "attempts": [i[1] for i in items],
                "upstream": list(wanted),
            },
        )
        rows = cur.fetchall()
    claims = [Claim(r[1], r[2], r[3], r[4], r[5], from_json(r[6])) for r in rows if r[0] == "claim"]
    upstream: dict[int, dict[str, Any]] = {}
    for _, _, run_id, node_id, _, _, output in (r for r in rows if r[0] == "output"):
        upstream.setdefault(run_id, {})[node_id] = from_json(output)
    return claims, upstream


def given_claims(items: list[Item], given: Given, upstream: dict[int, dict[str, Any]]) -> list[Claim]:
    """The claims of a direct job's attempts; add their predecessors' outputs to `upstream`."""
    claims = []
    for noderun_id, attempt, version_id, node_id in items:
        run_id, run_input, outputs = given[noderun_id]
        claims.append(
            Claim(noderun_id, run_id, node_id, attempt, version_id, from_json(run_input), direct=True)
        )
        upstream.setdefault(run_id, {}).update((p, from_json(output)) for p, output in outputs.items())
    return claims


def execute(c: Claim, outputs: dict[str, Any]) -> tuple[Outcome, datetime, datetime]:
    """Run one attempt's handler under its time limit; never raises."""
    node = load_graph(c.version_id).nodes[c.node_id]
    upstream = {p: outputs[p] for p in load_graph(c.version_id).predecessors(c.node_id) if p in outputs}
    started = timezone.now()
    ctx = handlers.NodeContext(
        run_id=c.run_id,
        node_id=c.node_id,
        attempt=c.attempt,
        idempotency_key=f"{c.run_id}:{c.node_id}:{c.attempt}",
        input=c.input,
        upstream=upstream,
        config=node.config,
        deadline=time.monotonic() + node.timeout_seconds,
    )
    try:
        with time_limit(node.timeout_seconds):
            output = handlers.get_handler(node.handler).func(ctx)
        limit = settings.SWITCHYARD["MAX_OUTPUT_BYTES"]
        outcome = Outcome(
            engine.SUCCEEDED, check_json_size(output, limit, f"The output of node {c.node_id!r}")
        )
    except NodeTimeout:
        outcome = Outcome(
            engine.FAILED, error=f"Node {c.node_id!r} timed out after {node.timeout_seconds:g} s."
        )
    except (handlers.HandlerError, Invalid) as exc:
        outcome = Outcome(engine.FAILED, error=str(exc))
    except Exception as exc:  # the one catch-all boundary: any handler bug fails the attempt
        outcome = Outcome(
            engine.FAILED, error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc()
        )
    return outcome, started, timezone.now()


def finish(results: list[Result], worker: str) -> tuple[list[int], list[tuple[Any, ...]]]:
    """Store the attempts' results, except those taken away meanwhile (cancel, lost worker).

    Return the runs whose nodes finished here, and the node rows (as advancing.SNAPSHOT_SQL's)
    of those of them, small enough to travel in a notice, that have no other node queued or
    running: the scheduler decides from these rows without reading the run again.
    """
    small_runs = {
        r.claim.run_id for r in results if len(load_graph(r.claim.version_id).order) <= bus.ROWS_AT_MOST
    }
    with connection.cursor() as cur:
        cur.execute(
            FINISH_SQL,
            {
                "results": json.dumps([r.row() for r in results]),
                "ids": [r.claim.noderun_id for r in results],
                "worker": worker,
                "small_runs": list(small_runs),
            },
        )
        rows = cur.fetchall()
    return [row[1] for row in rows if row[0] == "run"], [row[1:] for row in rows if row[0] == "node"]


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise NodeTimeout in this frame after `seconds` (main thread only, as RQ's own)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise NodeTimeout()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
