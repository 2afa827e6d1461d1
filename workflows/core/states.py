"""The statuses of nodes and runs, and the one table of the moves allowed between them.

Pure: standard library only. The engine reasons with these names; the runtime's
`transitions` modules are the only code that writes them, and every statement there declares
the move it performs, which must be a move of this table (tests/unit/test_states.py).

A move is (cause, from-status, to-status); `None` as the from-status is a row being created.
Adding a state is a member here, its rows in TABLE, the engine's decisions about it, and its
statements in `transitions`: nothing else writes a status. `waiting` was added so: nodes that
wait on a person, an event or a timer (causes wait, decide, event, expire). A waiting node is
neither in flight (it holds no worker, no job, no concurrency slot) nor terminal (its run is
not finished, and not stalled either: the reconciler leaves it alone).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum


class NodeStatus(StrEnum):
    PENDING = "pending"  # not decided yet
    QUEUED = "queued"  # claimed for an attempt, its job is in RQ
    RUNNING = "running"  # a worker started the attempt
    FAILED = "failed"  # the attempt failed; the scheduler retries or kills it
    RETRYING = "retrying"  # waiting for its backoff to expire (due_at)
    SUCCEEDED = "succeeded"
    DEAD = "dead"
    SKIPPED = "skipped"
    UPSTREAM_FAILED = "upstream_failed"
    CANCELLED = "cancelled"
    WAITING = "waiting"  # a wait node: on a decision, an event or a deadline; holds no worker


class RunStatus(StrEnum):
    WAITING = "waiting"  # started while its workflow was paused; runs on resume
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    # Sagas (core/compensation.py): a failed or cancelled run whose succeeded nodes name a
    # compensate handler undoes them, newest first, then ends compensated or compensation_failed.
    COMPENSATING = "compensating"
    COMPENSATED = "compensated"
    COMPENSATION_FAILED = "compensation_failed"


class Cause(StrEnum):
    """Why a status changes: each statement that changes one performs one cause."""

    CREATE = "create"  # a run and its node rows are written
    CLAIM = "claim"  # a scheduler gives a ready node a new attempt and a job
    REQUEUE = "requeue"  # a queued attempt whose job was lost gets a new job
    START = "start"  # a worker starts a queued attempt
    FINISH = "finish"  # an attempt's result is stored; a run ends
    SKIP = "skip"  # a node that can never run
    RETRY = "retry"  # a failed attempt waits for its backoff
    DEAD = "dead"  # a failed node out of attempts
    LOST = "lost"  # a running attempt whose worker died or never reported
    CANCEL = "cancel"  # an operator cancels a run
    REPLAY = "replay"  # an operator replays a dead node
    RESUME = "resume"  # a paused workflow's waiting runs start
    WAIT = "wait"  # a ready wait node starts waiting (its kind's claim): no job, no worker
    DECIDE = "decide"  # a person approves or rejects a waiting approval
    EVENT = "event"  # an event posted on a waiting node's key wakes it
    EXPIRE = "expire"  # a waiting node's deadline passes: a timer fires, an approval times out
    GATHER = "gather"  # a map node's items have all finished (or its list could not be computed)
    CHILD = "child"  # a workflow.run node's child run ends, or cannot start
    COMPENSATE = "compensate"  # a failed or cancelled run starts undoing its nodes; its undoing ends
    RERUN = "rerun"  # an operator re-runs a finished run from a node: it and all below it
    CALL = "call"  # an agent's attempt calls a workflow as a tool: it waits for the child run, no worker held
    HOLD = "hold"  # a running attempt's LLM call does not fit a spend budget, or its provider is unavailable: it waits, no worker held
    RELEASE = "release"  # a held attempt is offered again (budget raised, window reset, overspend allowed, breaker closed)


N = NodeStatus
R = RunStatus
NODE_TERMINAL = frozenset({N.SUCCEEDED, N.DEAD, N.SKIPPED, N.UPSTREAM_FAILED, N.CANCELLED})
NODE_IN_FLIGHT = frozenset({N.QUEUED, N.RUNNING, N.FAILED, N.RETRYING})
RUN_FINISHED = frozenset({R.SUCCEEDED, R.FAILED, R.CANCELLED, R.COMPENSATED, R.COMPENSATION_FAILED})

Moves = Mapping[Cause, Mapping[N | None, frozenset[N]]]
RunMoves = Mapping[Cause, Mapping[R | None, frozenset[R]]]

# The node table: cause -> from-status -> the statuses it may lead to.
NODE_MOVES: Moves = {
    # queued: a root with a direct job; succeeded or skipped: a fork's node carried over from
    # its origin with the origin's status and output (core/forks.py), never executed in the fork.
    Cause.CREATE: {None: frozenset({N.PENDING, N.QUEUED, N.SUCCEEDED, N.SKIPPED})},
    Cause.CLAIM: {N.PENDING: frozenset({N.QUEUED}), N.RETRYING: frozenset({N.QUEUED})},
    Cause.REQUEUE: {N.QUEUED: frozenset({N.QUEUED})},  # same attempt, another job
    Cause.START: {N.QUEUED: frozenset({N.RUNNING})},
    # From queued: a direct job's attempt, run without a start of its own. From pending: in
    # the statement that stores a success, the worker gives a successor that success makes
    # ready its first attempt, queued, and runs it itself (engine.successors_to_follow,
    # runtime/execution.py).
    Cause.FINISH: {
        N.RUNNING: frozenset({N.SUCCEEDED, N.FAILED}),
        N.QUEUED: frozenset({N.SUCCEEDED, N.FAILED}),
        N.PENDING: frozenset({N.QUEUED}),
    },
    Cause.SKIP: {N.PENDING: frozenset({N.SKIPPED, N.UPSTREAM_FAILED})},
    Cause.RETRY: {N.FAILED: frozenset({N.RETRYING})},
    Cause.DEAD: {N.FAILED: frozenset({N.DEAD})},
    Cause.LOST: {N.RUNNING: frozenset({N.FAILED})},
    Cause.CANCEL: {s: frozenset({N.CANCELLED}) for s in N if s not in NODE_TERMINAL},
    # A map node dead by a dead item waits again when that item's letter is replayed; the
    # item is then due at once (retrying), for the schedulers' housekeeping to claim.
    Cause.REPLAY: {
        N.DEAD: frozenset({N.PENDING, N.WAITING, N.RETRYING}),
        N.UPSTREAM_FAILED: frozenset({N.PENDING}),
    },
    # Waiting nodes: entered by their kind's claim (again after a retry's backoff), left by
    # a decision, an event or a deadline; a timeout whose policy is "fail" makes the node
    # failed, and the engine's retry/dead and dead letter apply as for a task. Cancel (above)
    # covers waiting like every other unfinished status.
    Cause.WAIT: {N.PENDING: frozenset({N.WAITING}), N.RETRYING: frozenset({N.WAITING})},
    Cause.DECIDE: {N.WAITING: frozenset({N.SUCCEEDED})},
    Cause.EVENT: {N.WAITING: frozenset({N.SUCCEEDED})},
    Cause.EXPIRE: {N.WAITING: frozenset({N.SUCCEEDED, N.FAILED})},
    # Map nodes (core/maps.py): the node waits (cause wait) while its items run; its items
    # are rows of their own (MapItem) that move by this same table as task attempts do
    # (create, claim, requeue, start, finish, retry, dead, lost, cancel, replay). Once all
    # have finished it succeeds with their outputs, or is dead by a dead item; a list that
    # cannot be computed fails it (then retried or dead as a task).
    Cause.GATHER: {N.WAITING: frozenset({N.SUCCEEDED, N.DEAD, N.FAILED})},
    # A child-run node waits (Cause.WAIT) while its child runs; the child's end moves it on:
    # succeeded with the child's output, or failed (the child failed or was cancelled, or it
    # could not start); the engine's retry (a new child) or dead letter then apply.
    # An agent (llm.agent) that calls a workflow as a tool also waits on a child run: its
    # attempt leaves its worker (cause call: running -> waiting) and the child's end queues
    # the same attempt again (waiting -> queued, a new job), to go on from its recorded steps.
    Cause.CHILD: {N.WAITING: frozenset({N.SUCCEEDED, N.FAILED, N.QUEUED})},
    Cause.CALL: {N.RUNNING: frozenset({N.WAITING})},
    # Spend budgets (workflows/budgets): an LLM call that would go over a budget holds its
    # attempt (running -> waiting, no attempt spent, no worker held); when the reason clears
    # the same attempt is queued again with a new job (waiting -> queued), and calls again.
    Cause.HOLD: {N.RUNNING: frozenset({N.WAITING})},
    Cause.RELEASE: {N.WAITING: frozenset({N.QUEUED})},
    # Re-run from a node (a finished run): the node and every node below it start over.
    Cause.RERUN: {s: frozenset({N.PENDING}) for s in (N.SUCCEEDED, N.DEAD, N.SKIPPED, N.UPSTREAM_FAILED)},
}
# A compensation step is a node row of its own (`<node>~compensate`), created pending (CREATE)
# when its run starts compensating, then claimed, run, retried or killed as a task.

# The run table, likewise.
RUN_MOVES: RunMoves = {
    Cause.CREATE: {None: frozenset({R.RUNNING, R.WAITING})},  # waiting: its workflow is paused
    Cause.RESUME: {R.WAITING: frozenset({R.RUNNING})},
    Cause.FINISH: {R.RUNNING: frozenset({R.SUCCEEDED, R.FAILED})},
    Cause.CANCEL: {R.RUNNING: frozenset({R.CANCELLED}), R.WAITING: frozenset({R.CANCELLED})},
    # A replayed run runs again; still running when other branches went on (all_done).
    Cause.REPLAY: {s: frozenset({R.RUNNING}) for s in (R.RUNNING, R.FAILED, R.SUCCEEDED)},
    # In the transaction that fails or cancels it, a run with something to undo starts
    # compensating; when every step is done it ends compensated (or compensation_failed: a
    # step is dead, its dead letter waits for an operator).
    Cause.COMPENSATE: {
        R.FAILED: frozenset({R.COMPENSATING}),
        R.CANCELLED: frozenset({R.COMPENSATING}),
        R.COMPENSATING: frozenset({R.COMPENSATED, R.COMPENSATION_FAILED}),
    },
    Cause.RERUN: {R.FAILED: frozenset({R.RUNNING}), R.SUCCEEDED: frozenset({R.RUNNING})},
}


def can_move_node(cause: Cause, source: NodeStatus | None, target: NodeStatus) -> bool:
    """Whether `cause` may take a node from `source` (None: a new row) to `target`."""
    return target in NODE_MOVES.get(cause, {}).get(source, frozenset())


def can_move_run(cause: Cause, source: RunStatus | None, target: RunStatus) -> bool:
    """Whether `cause` may take a run from `source` (None: a new row) to `target`."""
    return target in RUN_MOVES.get(cause, {}).get(source, frozenset())


def node_sources(cause: Cause) -> tuple[NodeStatus, ...]:
    """The node statuses `cause` may move from, in the enum's order."""
    return tuple(s for s in N if s in NODE_MOVES[cause])


def run_sources(cause: Cause) -> tuple[RunStatus, ...]:
    """The run statuses `cause` may move from, in the enum's order."""
    return tuple(s for s in R if s in RUN_MOVES[cause])
