"""The step log of agent nodes: record a finished step, read a loop's steps back.

A step is written by the attempt that made it, and only while that attempt is still the
node's running one: the insert is conditional on the node row (`status = 'running'` at that
attempt), so an attempt taken away meanwhile (a cancel, a worker declared lost whose
attempt was retried elsewhere) cannot add to the log, and learns it must stop. Steps are
numbered per node row across attempts (`seq`, unique): an attempt reads the highest once
when it starts and counts on from there, so a step cut short by a kill gets the same number
(and idempotency key) when the next attempt makes it again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.db import IntegrityError, connection
from django.db.models import Max

from workflows.core import agent
from workflows.core.states import NodeStatus
from workflows.handlers import HandlerError, NodeContext, recordings
from workflows.llm import usage
from workflows.store.models import AgentStep, LLMCall, Run
from workflows.store.recordings import RecordedCall
from workflows.store.statements import AGENT_STEPS, NODES, RUNS, table


class Superseded(HandlerError):
    """The attempt recording a step is no longer the node's running attempt."""


@dataclass(frozen=True)
class Attempt:
    """The attempt an agent loop runs in: where its steps go."""

    noderun_id: int
    run_id: int
    node_id: str
    attempt: int
    fingerprint: str


COLUMNS = (
    "node_run_id",
    "seq",
    "attempt",
    "kind",
    "status",
    "fingerprint",
    "idempotency_key",
    "request",
    "response",
    "model",
    "finish_reason",
    "input_tokens",
    "output_tokens",
    "turn_seq",
    "call_id",
    "tool",
    "arguments",
    "result",
    "error",
    "started_at",
    "finished_at",
)
JSON_COLUMNS = {"request", "response", "arguments", "result"}
DEFAULTS: dict[str, Any] = {
    "request": None,
    "response": None,
    "model": "",
    "finish_reason": "",
    "input_tokens": None,
    "output_tokens": None,
    "turn_seq": None,
    "call_id": "",
    "tool": "",
    "arguments": None,
    "result": None,
    "error": "",
}
RECORD_SQL = f"""
INSERT INTO {AGENT_STEPS} ({", ".join(COLUMNS)})
SELECT {", ".join(f"%({c})s" + ("::jsonb" if c in JSON_COLUMNS else "") for c in COLUMNS)}
WHERE EXISTS (
    SELECT 1 FROM {NODES}
    WHERE id = %(node_run_id)s AND attempt = %(attempt)s AND status = '{NodeStatus.RUNNING}'
)
"""
# A step with the call it made, in one statement (one round trip, one transaction): the
# recorded request and answer (handlers/recordings.py, parameters `live_*`), and for a model
# turn its LLM call's row (llm/usage.py, parameters `call_*`, the attempt's run, workflow and
# node read in the same statement). The call's rows are written even when the step is not
# (the attempt was taken away, or a newer one took its number): it was made, and maybe paid.
LIVE_CTE = f"""live AS (
    INSERT INTO {table(RecordedCall)} ({", ".join(recordings.LIVE_COLUMNS)})
    VALUES ({recordings.live_values("live_")})
)"""
CALL_CTE = f"""called AS (
    INSERT INTO {table(LLMCall)} (node_run_id, run_id, workflow_id, node_id, attempt, {", ".join(usage.CALL_COLUMNS)})
    SELECT n.id, n.run_id, r.workflow_id, n.node_id, n.attempt, {", ".join(f"%(call_{c})s" for c in usage.CALL_COLUMNS)}
    FROM {NODES} n JOIN {RUNS} r ON r.id = n.run_id WHERE n.id = %(node_run_id)s
)"""
RECORD_TOOL_SQL = f"WITH {LIVE_CTE}\n{RECORD_SQL} ON CONFLICT DO NOTHING"
RECORD_TURN_SQL = f"WITH {CALL_CTE},\n{LIVE_CTE}\n{RECORD_SQL} ON CONFLICT DO NOTHING"


@dataclass(frozen=True)
class Recorded:
    """A live call a step made, recorded with it (handlers/recordings.py)."""

    ctx: NodeContext
    request: dict[str, Any]
    response: Any
    label: str


def next_seq(noderun_id: int) -> int:
    """The number the node's next step takes."""
    top = AgentStep.objects.filter(node_run_id=noderun_id).aggregate(top=Max("seq"))["top"]
    return (top or 0) + 1


def record_step(
    at: Attempt,
    seq: int,
    kind: str,
    status: str,
    key: str,
    started: datetime,
    finished: datetime,
    *,
    recorded: Recorded | None = None,
    call: LLMCall | None = None,
    **fields: Any,
) -> None:
    """Store one step of the attempt, with the live call it `recorded` and, for a model turn,
    its LLM `call`'s row (usage.call_row); raise Superseded if the attempt no longer runs."""
    row = {
        **DEFAULTS,
        **fields,
        "node_run_id": at.noderun_id,
        "seq": seq,
        "attempt": at.attempt,
        "kind": kind,
        "status": status,
        "fingerprint": at.fingerprint,
        "idempotency_key": key,
        "started_at": started,
        "finished_at": finished,
    }
    for column in JSON_COLUMNS:
        row[column] = None if row[column] is None else json.dumps(row[column], ensure_ascii=False)
    sql = RECORD_SQL
    if recorded is not None:
        r = recorded
        row.update(recordings.live_params(r.ctx, r.request, r.response, r.label, prefix="live_"))
        sql = RECORD_TOOL_SQL
    if call is not None:
        assert recorded is not None, "a model turn's call is recorded with its request"
        row.update(usage.call_params(call, prefix="call_"))
        sql = RECORD_TURN_SQL
    superseded = Superseded(
        f"Node {at.node_id!r} of run {at.run_id} is no longer running attempt {at.attempt}; the agent loop stops."
    )
    try:
        # Autocommit, as the worker runs: a refused insert leaves no transaction to roll back.
        with connection.cursor() as cursor:
            cursor.execute(sql, row)
            inserted = cursor.rowcount
    except IntegrityError:  # a newer attempt took this number: this one is not the running one
        raise superseded from None
    if call is not None:
        usage.count_call(call)
    if inserted != 1:
        raise superseded


BEGAN_SQL = f"""
SELECT min(started_at) FROM {AGENT_STEPS}
WHERE node_run_id = %(node_run_id)s AND attempt = %(attempt)s AND started_at < %(job_started)s
"""


def attempt_began(noderun_id: int, attempt: int, job_started: datetime) -> datetime:
    """When this attempt began: before this job if it recorded steps earlier (it ran, waited
    for a workflow tool's child run, and was queued again), else when this job started."""
    with connection.cursor() as cursor:
        cursor.execute(BEGAN_SQL, {"node_run_id": noderun_id, "attempt": attempt, "job_started": job_started})
        first: datetime | None = cursor.fetchone()[0]
    return first or job_started


def loop_steps(at: Attempt) -> list[agent.Step]:
    """The node's recorded steps of this loop (its fingerprint), as the core reads them."""
    rows = AgentStep.objects.filter(node_run_id=at.noderun_id, fingerprint=at.fingerprint).order_by("seq")
    return [as_core_step(row) for row in rows]


STEPS_SQL = f"""
SELECT seq, kind, status, response, call_id, result, error, input_tokens, output_tokens,
       fingerprint = %(fingerprint)s
FROM {AGENT_STEPS} WHERE node_run_id = %(node_run_id)s ORDER BY seq
"""


def from_json(value: Any) -> Any:
    """A jsonb column as a raw cursor returns it (Django's backend loads jsonb as text)."""
    return json.loads(value) if isinstance(value, str) else value


def loop_start(at: Attempt) -> tuple[list[agent.Step], int]:
    """`loop_steps` and `next_seq` in one statement: the loop's steps and the next number.

    Steps of another loop (a replay with edited input) are read for their numbers only."""
    with connection.cursor() as cursor:
        cursor.execute(STEPS_SQL, {"fingerprint": at.fingerprint, "node_run_id": at.noderun_id})
        rows = cursor.fetchall()
    mine = [
        AgentStep(
            seq=seq,
            kind=kind,
            status=status,
            response=from_json(response),
            call_id=call_id,
            result=from_json(result),
            error=error,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
        )
        for seq, kind, status, response, call_id, result, error, input_tokens, output_tokens, ours in rows
        if ours
    ]
    return [as_core_step(row) for row in mine], (rows[-1][0] if rows else 0) + 1


def as_core_step(row: AgentStep) -> agent.Step:
    response = row.response or {}
    calls = tuple(
        agent.Call(str(c["id"]), str(c["name"]), str(c["arguments"]))
        for c in response.get("tool_calls") or ()
    )
    return agent.Step(
        seq=row.seq,
        kind=row.kind,
        status=row.status,
        content=str(response.get("content") or ""),
        calls=calls,
        call_id=row.call_id,
        result=row.result,
        error=row.error,
        input_tokens=row.input_tokens or 0,
        output_tokens=row.output_tokens or 0,
    )


def steps_of(noderun_id: int) -> list[AgentStep]:
    """Every step of a node, in order, for the pages, the API and the trace export."""
    steps = AgentStep.objects.filter(node_run_id=noderun_id).select_related("child_link__child__workflow")
    return list(steps.order_by("seq"))


def child_run_of(step: AgentStep) -> Run | None:
    """The child run a workflow tool's call started (workflows/agents/tools.py), else None."""
    try:
        return step.child_link.child
    except ObjectDoesNotExist:
        return None


@dataclass(frozen=True)
class Row:
    """A step as the run page draws it: nested under its turn, placed on the loop's time axis."""

    step: AgentStep
    depth: int  # 0: a model turn, 1: a tool call under it
    left: float  # percent of the loop's time span
    width: float
    first_of_attempt: bool
    turn: int  # the how-many-th model turn of its loop (a tool call: its turn's)


def timeline(steps: list[AgentStep]) -> list[Row]:
    """Place a node's steps on one time axis, from its first step's start to its last's end."""
    if not steps:
        return []
    start = min(s.started_at for s in steps)
    span = max((max(s.finished_at for s in steps) - start).total_seconds(), 1e-6)
    rows, attempt, turns, loop = [], 0, 0, ""
    for s in steps:
        if s.fingerprint != loop:  # a replay with edited input starts a new loop
            turns, loop = 0, s.fingerprint
        turns += s.kind == agent.TURN
        left = (s.started_at - start).total_seconds() / span * 100
        width = min(max((s.finished_at - s.started_at).total_seconds() / span * 100, 0.4), 100 - left)
        depth = int(s.kind == agent.TOOL)
        rows.append(Row(s, depth, round(left, 2), round(width, 2), s.attempt != attempt, turns))
        attempt = s.attempt
    return rows


def step_json(s: AgentStep) -> dict[str, Any]:
    """A step as the API and the trace export give it."""
    return {
        "seq": s.seq,
        "attempt": s.attempt,
        "kind": s.kind,
        "status": s.status,
        "idempotency_key": s.idempotency_key,
        "started_at": s.started_at,
        "finished_at": s.finished_at,
        "duration_ms": s.duration_ms,
        "model": s.model,
        "finish_reason": s.finish_reason,
        "input_tokens": s.input_tokens,
        "output_tokens": s.output_tokens,
        "request": s.request,
        "response": s.response,
        "turn_seq": s.turn_seq,
        "call_id": s.call_id,
        "tool": s.tool,
        "arguments": s.arguments,
        "result": s.result,
        "error": s.error,
        "child_run": child.pk if (child := child_run_of(s)) else None,
    }
