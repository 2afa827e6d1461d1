"""Execute node attempts inside a worker: claim, run the handlers, store the results, notify.

A worker hands over a batch of attempts (one RQ job, or several popped together). Postgres
sees one statement per batch that claims the attempts and reads their upstream outputs
(relaxed commit, see lifecycle.RELAXED_COMMIT), then one statement per flush that stores the
results and appends every attempt's span to the run history; Redis sees one XADD per flush.
Batchable attempts come in direct jobs that carry what they are given: they skip the claim
(see run_batch), so an idle hop between two such nodes costs one statement in the worker.
Results are flushed when the batch is done, or earlier once the oldest unflushed result has
waited FLUSH_AFTER_SECONDS, so a long batch never holds back its first nodes' successors.
The result is durable before the scheduler hears of it, so a crash between the two loses
nothing: the reconciler finds the finished node and re-drives its run.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, NamedTuple, Protocol, TypeVar

from django.conf import settings
from django.db import connection
from django.utils import timezone

from workflows import handlers
from workflows.core import engine
from workflows.core.compensation import given_by, is_step, step_node
from workflows.core.graph import Node
from workflows.core.states import NODE_TERMINAL, NodeStatus, RunStatus
from workflows.runtime import advancing, attemptlog, bus, kinds, tally, transitions
from workflows.runtime.jobs import Given, Item
from workflows.runtime.limits import NodeTimeout, time_limit
from workflows.runtime.logcontext import log_context
from workflows.runtime.outages import Outage
from workflows.store import redaction
from workflows.store.errors import STORES_AWAY, Invalid, connection_lost
from workflows.store.graphs import load_graph, workflow_of
from workflows.store.payloads import check_json_size, from_json

log = logging.getLogger(__name__)
T = TypeVar("T")


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
    status: NodeStatus  # succeeded or failed (waiting: the attempt was parked, see kinds.Parked)
    output: str | None = None  # JSON text
    error: str = ""
    traceback: str = ""
    log: str = ""  # what the handler logged and printed (attemptlog), size-limited
    retryable: bool = True  # False: no retry can fix this failure (handlers.HandlerError)


FLUSH_AFTER_SECONDS = 0.02
STORE_PATIENCE_SECONDS = 60.0  # when_up: how long a worker holds results for a restarting PostgreSQL


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
        if self.outcome.log:
            span["log"] = self.outcome.log
        return span

    def row(self) -> dict[str, Any]:
        """This result as a row of transitions.FINISH_SQL's results."""
        return {
            "id": self.claim.noderun_id,
            "attempt": self.claim.attempt,
            "status": self.outcome.status,
            "output": self.outcome.output,
            "error": self.outcome.error,
            "traceback": self.outcome.traceback,
            "retryable": self.outcome.retryable,
            "started_at": self.started.isoformat(),
            "finished_at": self.finished.isoformat(),
            "span": self.span(),
            "from_status": NodeStatus.QUEUED if self.claim.direct else NodeStatus.RUNNING,
        }


class SlotPool(Protocol):
    """Where a worker runs I/O-bound attempts, many at once (runtime/slots.py)."""

    def submit(self, claim: Claim, outputs: dict[str, Any]) -> None: ...


def run_batch(
    items: list[Item], worker: str, given: Given | None = None, slots: SlotPool | None = None
) -> int:
    """Execute the claimable attempts among (noderun id, attempt, version id, node id).

    Attempts in `given` come from a direct job (jobs.claim_and_enqueue), which brought what
    they are given: they run without a claim, stay queued meanwhile, and their results are
    stored only if they are still queued at that attempt (a cancel or a newer attempt
    drops them). With `slots`, claimed attempts of I/O-bound nodes (kinds.is_io_bound) are
    handed to them, recorded running, and this returns without waiting for them: the slots
    store their results. Successors that a success makes ready on its own (`follows`) are
    queued by the statement that stores it and run here, as direct attempts. Return how
    many ran or were handed over.
    """
    given = given or {}
    claims, upstream = claim([item for item in items if item[0] not in given], worker)
    claims += given_claims([item for item in items if item[0] in given], given, upstream)
    order = {item[0]: n for n, item in enumerate(items)}
    claims.sort(key=lambda c: order[c.noderun_id])
    todo = deque(claims)
    results: list[Result] = []
    ran, oldest = 0, 0.0
    owed = False  # a store committed relaxed, whose flush the successors it queued here pay (settle)
    while todo:
        c = todo.popleft()
        ran += 1
        if slots is not None and not c.direct and kinds.is_io_bound(node_of(c)):
            slots.submit(c, upstream.get(c.run_id, {}))
        else:
            result = Result(c, *execute(c, upstream.get(c.run_id, {})))
            if result.outcome.status != NodeStatus.WAITING:  # parked (kinds.Parked): nothing to store
                results.append(result)
                tally.add(result.outcome.status == NodeStatus.SUCCEEDED)
                oldest = oldest or time.monotonic()
        if results and (not todo or time.monotonic() - oldest >= FLUSH_AFTER_SECONDS):
            followed, owed = when_up(
                f"worker {worker}: storing {len(results)} results", store, results, worker, upstream, owed
            )
            todo.extend(followed)
            results, oldest = [], 0.0
    return ran


def when_up(what: str, store_them: Callable[..., T], *args: Any) -> T:
    """`store_them(*args)`, again once PostgreSQL answers, when a restart cut the connection under it.

    For a worker's results in hand, of attempts running on this live worker: dropped, they
    would wait for the reconciler's overdue check (the node's timeout and more), since no
    heartbeat stops. Stored again instead (every write is conditional on the attempt, so a
    store that committed before the cut changes nothing the second time; what it queued for
    this worker to run, or the maps it would have stepped, then wait for the reconciler). A
    statement's own error, or PostgreSQL away for longer than STORE_PATIENCE_SECONDS, is
    raised as before.
    """
    outage, deadline = Outage(what, log), None
    while True:
        try:
            done = store_them(*args)
        except STORES_AWAY as exc:
            deadline = deadline or time.monotonic() + STORE_PATIENCE_SECONDS
            if not connection_lost(exc) or time.monotonic() >= deadline:
                raise
            connection.close()  # replaced at the next statement
            time.sleep(outage.failed(exc))
        else:
            outage.ok()
            return done


def store(
    results: list[Result], worker: str, upstream: dict[int, dict[str, Any]], owed: bool = False
) -> tuple[list[Claim], bool]:
    """Store the results, notify, and return the successors queued to run here (see `follows`)
    and whether a flush is still owed (`settle`, given `owed`: one owed by the store before).

    Their predecessors' outputs join `upstream`: this batch's results, and for a fan-in the
    others' outputs, which the statement read back.
    """
    done, decided, owed = settle(results, worker, follows(results), owed)
    bus.notify(decided.run_ids, decided.rows)
    outputs = {**done.outputs, **{(r.claim.run_id, r.claim.node_id): r.outcome.output for r in results}}
    claims = []
    for f in done.followed:
        given = upstream.setdefault(f.run_id, {})
        for before in load_graph(f.version_id).predecessors(f.node_id):
            given[before] = from_json(outputs[(f.run_id, before)])
        claims.append(
            Claim(f.noderun_id, f.run_id, f.node_id, f.attempt, f.version_id, from_json(f.input), True)
        )
    return claims, owed


class Decided(NamedTuple):
    """What a worker leaves to the schedulers after storing results, and what it ends itself."""

    run_ids: list[int]  # the runs the schedulers must hear of
    rows: list[transitions.NodeRow]  # the rows their notice carries
    finishes: list[transitions.FinishRun]  # runs that ended with these results: ended here


def decide(done: transitions.Finished) -> Decided:
    """Which runs the schedulers must hear of, and which this worker ends itself.

    A run whose rows came back (nothing else of it was queued or running: they are its whole
    state, and nothing else can change it meanwhile but a change that sends its own notice,
    a cancel or a replay) is decided here with the engine, from those rows:
    - it goes on here with nothing to decide (a successor was queued for this worker and
      the engine decides nothing else): left out; this worker's next store notifies it again.
      Without this, each hop a worker continued cost the scheduler a decision about nothing.
    - every node is terminal and the engine's one decision is that it succeeded: this
      worker ends it (advancing.apply_finishes, the scheduler's own statement, conditional on
      the run's epoch), saving the notice and the scheduler's turn between a run's last node
      and its end. A failed end stays the scheduler's (it may begin compensations).
    Graphs with edge conditions are always notified unless they end here: their rows lack
    the outputs the conditions read, which an ending run no longer needs. Runs the store's
    statement ended (`done.ended`, see settle) are neither notified nor decided again; what
    is decided here is what that statement could not see: a run completed by a node with
    successors (under an any_success or all_done join), or a child run.
    """
    by_run: dict[int, list[transitions.NodeRow]] = {}
    for row in done.rows:
        by_run.setdefault(row.run_id, []).append(row)
    followed = {f.run_id for f in done.followed}
    here: set[int] = set(done.ended)  # the statement ended them (settle)
    finishes = []
    for run_id, rows in by_run.items():
        if run_id in here:
            continue
        graph = load_graph(rows[0].version_id)
        states = {r.node_id: engine.NodeState(r.status, r.tries, retryable=r.retryable) for r in rows}
        if states.keys() != set(graph.order):
            continue
        if all(state.status in NODE_TERMINAL for state in states.values()):
            decisions = engine.advance(graph, states)
            if decisions == [engine.FinishRun(RunStatus.SUCCEEDED)]:
                finishes.append(transitions.FinishRun(run_id, rows[0].epoch, RunStatus.SUCCEEDED))
                here.add(run_id)
        elif run_id in followed and not graph.has_conditions and not engine.advance(graph, states):
            here.add(run_id)
    return Decided(
        [r for r in done.run_ids if r not in here],
        [row for row in done.rows if row.run_id not in here],
        finishes,
    )


def follows(results: list[Result]) -> list[tuple[int, str, tuple[str, ...]]]:
    """(result's row id, successor, its other predecessors) for each successor this worker
    may queue and run itself once its other predecessors have succeeded.

    A successor that waited for the scheduler cost it a notice, a decision, a claim statement
    and an RQ job, and the worker a pop. Measured on the demo DAG at N=2000 fed in bulk (one
    node in four continues; docs/benchmarks.md, 2026-11-27, three pairs alternating): the
    scheduler's CPU per 1k nodes fell from 0.068-0.077 to 0.051-0.059 s and Redis commands
    per node from 0.49-0.53 to 0.45-0.46; the total stayed at 0.33 within the noise. Only
    when nothing else decides: the success alone makes it ready, or with the others named
    (a fan-in whose join is all_success and whose edges have no condition:
    engine.successors_to_follow) the statement that stores it sees them succeeded; it is a
    short CPU-only step (batchable: it runs in this batch, never in a slot) and no cap or
    rate limit applies (those are admitted by a scheduler, capacity.py). Compensation steps
    and runs that are not running are left out (the statement checks the run). A fan-in
    named by two results of this batch is named once.
    """
    pairs: dict[tuple[int, str], tuple[int, str, tuple[str, ...]]] = {}
    for r in results:
        if r.outcome.status != NodeStatus.SUCCEEDED or is_step(r.claim.node_id):
            continue
        graph = load_graph(r.claim.version_id)
        output = from_json(r.outcome.output)
        for s, others in engine.successors_to_follow(graph, r.claim.node_id, output, r.claim.input):
            node = graph.nodes[s]
            if handlers.get_handler(node.handler).batchable and not node.limited:
                pairs.setdefault((r.claim.run_id, s), (r.claim.noderun_id, s, others))
    return list(pairs.values())


def claim(items: list[Item], worker: str) -> tuple[list[Claim], dict[int, dict[str, Any]]]:
    """Move queued attempts to running and read what they are given.

    Return the claims (stale, duplicate or cancelled attempts are left out), and run id ->
    {node id: output} of their succeeded predecessors.
    """
    if not items:
        return [], {}
    # What the attempts need of their versions is read before they are claimed: from the
    # claim (running, on this live worker) to the handler nothing reads PostgreSQL, which a
    # cut there would leave running until the reconciler's overdue check.
    wanted = {p for _, _, version_id, node_id in items for p in given_by(load_graph(version_id), node_id)}
    for version_id in {item[2] for item in items}:
        workflow_of(version_id)  # the context's (context_for); cached per process
    rows = transitions.start_attempts(worker, [i[0] for i in items], [i[1] for i in items], list(wanted))
    claims = [
        Claim(r.noderun_id, r.run_id, r.node_id, r.attempt, r.version_id, from_json(r.value))
        for r in rows
        if r.kind == "claim"
    ]
    upstream: dict[int, dict[str, Any]] = {}
    for r in rows:
        if r.kind == "output":
            upstream.setdefault(r.run_id, {})[r.node_id] = from_json(r.value)
    return claims, upstream


def given_claims(items: list[Item], given: Given, upstream: dict[int, dict[str, Any]]) -> list[Claim]:
    """The claims of a direct job's attempts; add their predecessors' outputs to `upstream`."""
    claims = []
    for noderun_id, attempt, version_id, node_id in items:
        run_id, run_input, outputs = given[noderun_id]  # a GivenInput (a plain tuple from older jobs)
        claims.append(
            Claim(noderun_id, run_id, node_id, attempt, version_id, from_json(run_input), direct=True)
        )
        upstream.setdefault(run_id, {}).update((p, from_json(output)) for p, output in outputs.items())
    return claims


def execute(c: Claim, outputs: dict[str, Any]) -> tuple[Outcome, datetime, datetime]:
    """Run one attempt's handler under its time limit, capturing what it logs; never raises."""
    with attemptlog.captured() as capture:
        outcome, started, finished = run_handler(c, outputs)
    return redacted(replace(outcome, log=capture.text())), started, finished


def redacted(outcome: Outcome) -> Outcome:
    """The outcome with every secret value this process revealed replaced by its name
    (store/redaction.py); the output was redacted as a value before it became JSON text."""
    return replace(
        outcome,
        error=redaction.redact(outcome.error),
        traceback=redaction.redact(outcome.traceback),
        log=redaction.redact(outcome.log),
    )


def node_of(c: Claim) -> Node:
    return step_node(load_graph(c.version_id), c.node_id)  # a node, or a compensation step


def run_handler(c: Claim, outputs: dict[str, Any]) -> tuple[Outcome, datetime, datetime]:
    """Run one attempt's handler under its time limit; never raises."""
    node = node_of(c)
    started = timezone.now()
    ctx = context_for(c, node, outputs)
    outcome = run_attempt(node, ctx, f"node {c.node_id!r}")
    finished = timezone.now()
    return outcome, kinds.began(node, ctx, started), finished


def context_for(c: Claim, node: Node, outputs: dict[str, Any]) -> handlers.NodeContext:
    """What the attempt's handler reads; its deadline starts now."""
    upstream = {p: outputs[p] for p in given_by(load_graph(c.version_id), c.node_id) if p in outputs}
    return handlers.NodeContext(
        run_id=c.run_id,
        node_id=c.node_id,
        attempt=c.attempt,
        idempotency_key=f"{c.run_id}:{c.node_id}:{c.attempt}",
        input=c.input,
        upstream=upstream,
        config=node.config,
        deadline=time.monotonic() + node.timeout_seconds,
        node_run_id=c.noderun_id,
        workflow_id=workflow_of(c.version_id),
    )


def run_attempt(node: Node, ctx: handlers.NodeContext, what: str) -> Outcome:
    """Run one attempt (of a node, or of a map's item: `what`) by its kind; never raises."""
    try:
        with (
            log_context(run_id=ctx.run_id, node_id=ctx.node_id, attempt=ctx.attempt),
            time_limit(node.timeout_seconds),
        ):
            output = redaction.redact_value(kinds.kind_of(node).execute(node, ctx))
        limit = settings.SWITCHYARD["MAX_OUTPUT_BYTES"]
        return Outcome(NodeStatus.SUCCEEDED, check_json_size(output, limit, f"The output of {what}"))
    except kinds.Parked:
        return Outcome(NodeStatus.WAITING)
    except NodeTimeout:
        return timed_out(node, what)
    except Exception as exc:  # the one catch-all boundary: any handler bug fails the attempt
        return failed(exc)


def timed_out(node: Node, what: str) -> Outcome:
    return Outcome(
        NodeStatus.FAILED, error=f"{what[0].upper()}{what[1:]} timed out after {node.timeout_seconds:g} s."
    )


# A traceback is kept on the attempt and its dead letter up to this many characters: its
# head (the outermost frames) and its tail (where it was raised, and the message) survive.
TRACEBACK_CHARS = 8000
TRACEBACK_HEAD_CHARS = 1500


def failed(exc: BaseException) -> Outcome:
    """The outcome of an attempt whose handler raised `exc`: its message (a HandlerError's as
    written, a bug's with its type), whether a retry can fix it, and its traceback, bounded."""
    expected = isinstance(exc, handlers.HandlerError | Invalid)
    error = str(exc) if expected else f"{type(exc).__name__}: {exc}"
    return Outcome(
        NodeStatus.FAILED,
        error=error,
        traceback=bounded_traceback(exc),
        retryable=handlers.is_retryable(exc),
    )


def bounded_traceback(exc: BaseException, limit: int = TRACEBACK_CHARS) -> str:
    """`exc`'s traceback as text, its middle cut when longer than `limit` characters."""
    text = "".join(traceback.format_exception(exc))
    if len(text) <= limit:
        return text
    head = text[:TRACEBACK_HEAD_CHARS]
    tail = text[-(limit - TRACEBACK_HEAD_CHARS) :]
    return f"{head}\n... ({len(text) - len(head) - len(tail)} characters cut) ...\n{tail}"


def finish(results: list[Result], worker: str) -> tuple[list[int], list[transitions.NodeRow]]:
    """Store the attempts' results, except those taken away meanwhile (cancel, lost worker),
    and end the runs they complete (`decide`).

    Return the other runs whose nodes finished here, and the node rows of those of them,
    small enough to travel in a notice, that have no other node queued or running: the
    scheduler decides from these rows without reading the run again.
    """
    _, decided, _ = settle(results, worker, [])
    return decided.run_ids, decided.rows


def settle(
    results: list[Result], worker: str, follows: list[tuple[int, str, tuple[str, ...]]], owed: bool = False
) -> tuple[transitions.Finished, Decided, bool]:
    """Store the results, queueing the successors `follows` names and ending the runs they
    complete (transitions.finish_attempts, then `decide` for what the statement left); return
    what was stored and decided, and whether the store's flush is still owed.

    What is stored is durable before anything but this worker acts on it: before a notice,
    or a run's end is announced. A store of one run's results (the worker's lone run, hop
    by hop) waits for the disk once per run, at its end (an idle run of the demo DAG waited
    four times in a row, about 0.3-0.5 ms each here: docs/benchmarks.md):
    - when a node with no successor is among them, the statement itself ends the run if
      they complete it (`ends`, transitions.ENDED; runs of up to bus.ROWS_AT_MOST nodes),
      and commits synchronously: where it was a relaxed store, then the end's statement;
    - when the worker may run a successor itself (`follows`), it commits relaxed (not
      waiting for the disk): the successor's own store, this worker's next statement,
      flushes both (a commit's flush covers all the WAL before it). Until then the flush is
      owed (returned, and given back by the next call as `owed`). The successor runs next in
      this batch (it is batchable: it never parks), so its store always comes.
    A batch of several runs leaves their ends to `decide` (one statement for all of them;
    a lock on each run the store might end would cost more than it saves): when a node
    with no successor is among its results, the store commits relaxed and that statement,
    synchronous, flushes both; else it commits synchronously (one of its runs nearly always
    has a notice to send, and a flush after a relaxed commit would be a round trip more).
    A store that commits synchronously and stores something pays a flush owed; one that
    leaves a notice to send, or queues nothing, pays it with lifecycle.flush_commits first,
    as does a relaxed store whose runs did not end. A crash of PostgreSQL in between loses
    nothing a crash just before the store would not: the attempts run again (at-least-once),
    and a successor that ran on a result lost so runs again after it.
    """
    small, run_ids = small_runs(results), {r.claim.run_id for r in results}
    alone = len(run_ids) == 1
    may_end = any(may_end_its_run(r) for r in results)
    ends = sorted(run_ids & small) if alone and may_end else []
    relaxed = not ends and (may_end or (alone and bool(follows)))
    done = transitions.finish_attempts([r.row() for r in results], worker, small, follows, relaxed, ends)
    bus.publish_runs_finished([(run_id, RunStatus.SUCCEEDED) for run_id in done.ended])
    decided = decide(done)
    paid = bool(advancing.apply_finishes(decided.finishes)) or (not relaxed and bool(done.run_ids))
    owed = (owed or relaxed) and not paid
    if owed and (decided.run_ids or not done.followed):
        transitions.flush_commits()
        owed = False
    return done, decided, owed


def small_runs(results: list[Result]) -> set[int]:
    """The runs among the results whose node rows are few enough to come back (bus.ROWS_AT_MOST)."""
    return {r.claim.run_id for r in results if len(load_graph(r.claim.version_id).order) <= bus.ROWS_AT_MOST}


def may_end_its_run(r: Result) -> bool:
    """A success of a node with no successor (compensation steps: the scheduler ends those runs)."""
    node_id = r.claim.node_id
    return (
        r.outcome.status == NodeStatus.SUCCEEDED
        and not is_step(node_id)
        and not load_graph(r.claim.version_id).successors(node_id)
    )


def finish_and_follow(
    results: list[Result], worker: str, follows: list[tuple[int, str, tuple[str, ...]]]
) -> transitions.Finished:
    """Store the results and queue the successors `follows` names (transitions.finish_attempts)."""
    return transitions.finish_attempts([r.row() for r in results], worker, small_runs(results), follows)
