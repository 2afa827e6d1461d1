"""Execute node attempts inside a worker: claim, run the handler, store the result, notify.

Per node, Postgres sees one claim statement (per job), one read of upstream outputs (per
job, only if a node has predecessors) and one finish statement that stores the result and
appends the attempt's span to the run history; Redis sees one XADD. The result is durable
before the scheduler hears of it, so a crash between the two loses nothing: the reconciler
finds the finished node and re-drives its run.
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
from django.db import connection, transaction
from django.utils import timezone

from workflows import bus, engine, handlers
from workflows.errors import Invalid
from workflows.runs import check_json_size, relax_commit
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


@dataclass(frozen=True)
class Outcome:
    status: str
    output: str | None = None  # JSON text
    error: str = ""
    traceback: str = ""


CLAIM_SQL = """
UPDATE workflows_noderun n SET status = 'running', worker = %s, started_at = now()
FROM unnest(%s::bigint[], %s::int[]) AS v(id, attempt), workflows_run r
WHERE n.id = v.id AND n.attempt = v.attempt AND n.status = 'queued'
  AND r.id = n.run_id AND r.status = 'running'
RETURNING n.id, n.run_id, n.node_id, n.attempt, r.version_id, r.input
"""

UPSTREAM_SQL = """
SELECT run_id, node_id, output FROM workflows_noderun
WHERE run_id = ANY(%s) AND node_id = ANY(%s) AND status = 'succeeded'
"""

FINISH_SQL = """
WITH done AS (
    UPDATE workflows_noderun
    SET status = %s, output = %s::jsonb, error = %s, traceback = %s, started_at = %s, finished_at = %s
    WHERE id = %s AND attempt = %s AND status = 'running'
    RETURNING run_id, node_id, attempt, worker, started_at, finished_at
)
INSERT INTO workflows_runevent (run_id, kind, node_id, attempt, at, started_at, worker, data)
SELECT run_id, 'node.attempt', node_id, attempt, finished_at, started_at, worker, %s::jsonb FROM done
RETURNING run_id
"""


def from_json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def run_batch(items: list[tuple[int, int]], worker: str) -> int:
    """Execute the claimable attempts among (noderun id, attempt); return how many ran."""
    claims = claim(items, worker)
    upstream = load_upstream(claims)
    for c in claims:
        outcome, started, finished = execute(c, upstream.get(c.run_id, {}))
        if finish(c, outcome, started, finished):
            bus.notify([c.run_id])
    return len(claims)


def claim(items: list[tuple[int, int]], worker: str) -> list[Claim]:
    """Move queued attempts to running; stale, duplicate or cancelled ones are not returned."""
    with transaction.atomic(), connection.cursor() as cur:
        relax_commit(cur)
        cur.execute(CLAIM_SQL, [worker, [i for i, _ in items], [a for _, a in items]])
        rows = cur.fetchall()
    order = {noderun_id: n for n, (noderun_id, _) in enumerate(items)}
    claims = [Claim(r[0], r[1], r[2], r[3], r[4], from_json(r[5])) for r in rows]
    return sorted(claims, key=lambda c: order[c.noderun_id])


def load_upstream(claims: list[Claim]) -> dict[int, dict[str, Any]]:
    """Return run id -> {node id: output} of the claimed nodes' predecessors."""
    wanted = {p for c in claims for p in load_graph(c.version_id).predecessors(c.node_id)}
    if not wanted:
        return {}
    result: dict[int, dict[str, Any]] = {}
    with connection.cursor() as cur:
        cur.execute(UPSTREAM_SQL, [list({c.run_id for c in claims}), list(wanted)])
        for run_id, node_id, output in cur.fetchall():
            result.setdefault(run_id, {})[node_id] = from_json(output)
    return result


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


def finish(c: Claim, outcome: Outcome, started: datetime, finished: datetime) -> bool:
    """Store the attempt's result unless the attempt was taken away (cancel, lost worker)."""
    span = {"status": outcome.status, "duration_ms": round((finished - started).total_seconds() * 1000, 3)}
    if outcome.error:
        span["error"] = outcome.error[:500]
    with connection.cursor() as cur:
        cur.execute(
            FINISH_SQL,
            [
                outcome.status,
                outcome.output,
                outcome.error,
                outcome.traceback,
                started,
                finished,
                c.noderun_id,
                c.attempt,
                json.dumps(span),
            ],
        )
        return cur.fetchone() is not None


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
