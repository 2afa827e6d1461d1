"""Decide what a run does next, from a snapshot of its nodes' states.

Pure: no Django, no Redis, no clock, no randomness (the caller passes `rand`). The same
function runs in the scheduler, the reconciler and in tests. It never mutates anything: it
returns decisions, and `runs.py` applies them with conditional updates, so two schedulers
deciding from snapshots of the same run can never start a node twice.

Node states and their meaning (named in core/states.py, with the one table of the moves between
them that workflows/runtime/transitions.py performs):

    pending          not decided yet
    queued           claimed for an attempt, its job is in RQ
    running          a worker claimed the attempt
    failed           the attempt failed; waiting for the scheduler to retry or kill it
                     (killed at once when the failure is not retryable)
    retrying         waiting for its backoff to expire (due_at)
    succeeded        output stored                                       (terminal)
    dead             every attempt failed; a dead letter holds it        (terminal, replayable)
    skipped          a branch not taken: an edge condition was false     (terminal)
    upstream_failed  cannot run because a predecessor died               (terminal, reset on replay)
    cancelled        the run was cancelled                               (terminal)
    waiting          a wait node (core/waits.py) waits on a person, an event or a deadline:
                     no worker, no job, no slot; neither in flight nor terminal, so its run
                     is not finished; left by a decision, an event or a deadline (succeeded,
                     or failed by a timeout whose policy is "fail": retried or dead as a task)

Join rules over the incoming edges; each edge is `taken` (source succeeded and its condition
holds), `not_taken` (source skipped, or condition false), `failed` (source dead or
upstream_failed) or `waiting` (source not terminal):

    all_success  any failed -> upstream_failed; any not_taken -> skipped; all taken -> run
    any_success  any taken -> run; any waiting -> wait; any failed -> upstream_failed; else skipped
    all_done     any waiting -> wait; every edge not_taken -> skipped; else run

A run ends when every node is terminal: `failed` if any node is dead (its dead letter is
waiting for an operator), otherwise `succeeded`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from workflows.core.graph import AGENT, CHILD, DEFAULT_JOIN, MAP, TASK, WAIT_KINDS, Edge, Graph
from workflows.core.states import NODE_TERMINAL, NodeStatus as N, RunStatus as R

_TAKEN, _NOT_TAKEN, _EDGE_FAILED, _WAITING = "taken", "not_taken", "failed", "waiting"
_READY, _WAIT = "ready", "wait"


@dataclass(frozen=True)
class NodeState:
    """What the engine needs to know of one node of a run."""

    status: str
    tries: int = 0
    output: Any = None
    retryable: bool = True  # False: the failed attempt said no retry can fix it


@dataclass(frozen=True)
class EnqueueNode:
    node_id: str


@dataclass(frozen=True)
class WaitNode:
    """A ready wait node starts waiting: its kind's claim, no job (runtime/kinds.py)."""

    node_id: str


@dataclass(frozen=True)
class SkipNode:
    node_id: str
    status: str  # N.SKIPPED or N.UPSTREAM_FAILED


@dataclass(frozen=True)
class RetryNode:
    node_id: str
    tries: int
    delay: float


@dataclass(frozen=True)
class KillNode:
    node_id: str
    tries: int


@dataclass(frozen=True)
class FinishRun:
    status: str


Decision = EnqueueNode | WaitNode | SkipNode | RetryNode | KillNode | FinishRun


def advance(
    graph: Graph, states: Mapping[str, NodeState], run_input: Any = None, rand: float = 0.5
) -> list[Decision]:
    """Return every decision the snapshot allows, in topological order.

    Failed attempts are resolved first (retry or kill), so that a node killed now already
    propagates `upstream_failed` to its successors in the same pass.
    """
    current = dict(states)
    decisions: list[Decision] = []
    for node_id in graph.order:
        state = current[node_id]
        if state.status == N.FAILED:
            decision = resolve_failure(graph, node_id, state, rand)
            decisions.append(decision)
            status = N.RETRYING if isinstance(decision, RetryNode) else N.DEAD
            current[node_id] = NodeState(status, state.tries)
        elif state.status == N.PENDING:
            verdict = judge(graph, node_id, current, run_input)
            if verdict == _READY:
                start = start_node(graph, node_id)
                decisions.append(start)
                current[node_id] = NodeState(
                    N.WAITING if isinstance(start, WaitNode) else N.QUEUED, state.tries
                )
            elif verdict != _WAIT:
                decisions.append(SkipNode(node_id, verdict))
                current[node_id] = NodeState(verdict, state.tries)
    finish = finish_status(current.values())
    if finish is not None:
        decisions.append(FinishRun(finish))
    return decisions


def start_node(graph: Graph, node_id: str) -> EnqueueNode | WaitNode:
    """Decide how a ready node starts: the one place where the engine looks at a node's kind.

    A task is enqueued for a worker; so is an agent loop (its steps are the runtime's); a
    wait node waits, holding no worker; so do a map node while its items run (core/maps.py)
    and a child-run node (`workflow.run`) while its child runs. A new kind adds its branch
    here and its runtime side in workflows/runtime/kinds.py.
    """
    kind = graph.nodes[node_id].kind
    if kind in (TASK, AGENT):
        return EnqueueNode(node_id)
    if kind in WAIT_KINDS:
        return WaitNode(node_id)
    if kind in (MAP, CHILD):
        return WaitNode(node_id)
    raise ValueError(f"Node {node_id!r} has kind {kind!r}, which this engine cannot run.")


def successors_to_follow(
    graph: Graph, node_id: str, output: Any, run_input: Any
) -> list[tuple[str, tuple[str, ...]]]:
    """The tasks that `node_id` succeeding with `output` makes ready once others have succeeded:
    (successor, the other predecessors that must have succeeded).

    A successor with one incoming edge, from `node_id`, whose join holds over that edge alone
    needs nothing else (no other node's state can change the decision). A fan-in needs every
    other predecessor succeeded: it is offered only when its join is `all_success` and no
    edge into it has a condition, so "every predecessor succeeded" is exactly its join
    holding. Whoever stores the result may start it if the store's own statement sees those
    others succeeded (runtime/transitions.py checks it there); two predecessors stored at
    the same moment each see the other unfinished, and the scheduler decides (`advance`).
    """
    succeeded = {node_id: NodeState(N.SUCCEEDED, output=output)}
    follow: list[tuple[str, tuple[str, ...]]] = []
    for s in graph.successors(node_id):
        edges = graph.incoming(s)
        if graph.nodes[s].kind != TASK:
            continue
        if len(edges) == 1:
            if judge(graph, s, succeeded, run_input) == _READY:
                follow.append((s, ()))
        elif graph.nodes[s].join == "all_success" and all(e.when is None for e in edges):
            follow.append((s, tuple(sorted({e.source for e in edges} - {node_id}))))
    return follow


def resolve_failure(graph: Graph, node_id: str, state: NodeState, rand: float) -> RetryNode | KillNode:
    """Retry a failed attempt while the node's retry budget lasts, else kill it.

    A failure that says no retry can fix it (a missing input field, a config off its schema,
    a provider's 400 or 401) is killed at once: no backoff, whatever the budget left.
    """
    policy = graph.nodes[node_id].retry
    if state.retryable and state.tries < policy.max_attempts:
        return RetryNode(node_id, state.tries, policy.delay(state.tries, rand))
    return KillNode(node_id, state.tries)


def judge(graph: Graph, node_id: str, states: Mapping[str, NodeState], run_input: Any) -> str:
    """Return _READY, _WAIT, N.SKIPPED or N.UPSTREAM_FAILED for a pending node."""
    edges = graph.incoming(node_id)
    if not edges:
        return _READY
    outcomes = [edge_outcome(edge, states[edge.source], run_input) for edge in edges]
    return JOINS[graph.nodes[node_id].join](outcomes)


def edge_outcome(edge: Edge, source: NodeState, run_input: Any) -> str:
    """Classify one incoming edge from its source's state and the edge's condition."""
    if source.status == N.SUCCEEDED:
        if edge.when is None or edge.when.evaluate(source.output, run_input):
            return _TAKEN
        return _NOT_TAKEN
    if source.status == N.SKIPPED:
        return _NOT_TAKEN
    if source.status in NODE_TERMINAL:
        return _EDGE_FAILED
    return _WAITING


def join_all_success(outcomes: list[str]) -> str:
    """Runs when every predecessor succeeded."""
    if _EDGE_FAILED in outcomes:
        return N.UPSTREAM_FAILED
    if _NOT_TAKEN in outcomes:
        return N.SKIPPED
    return _READY if all(o == _TAKEN for o in outcomes) else _WAIT


def join_any_success(outcomes: list[str]) -> str:
    """Runs when at least one predecessor succeeded."""
    if _TAKEN in outcomes:
        return _READY
    if _WAITING in outcomes:
        return _WAIT
    return N.UPSTREAM_FAILED if _EDGE_FAILED in outcomes else N.SKIPPED


def join_all_done(outcomes: list[str]) -> str:
    """Runs when every predecessor finished, whatever the outcome."""
    if _WAITING in outcomes:
        return _WAIT
    return N.SKIPPED if all(o == _NOT_TAKEN for o in outcomes) else _READY


# The join rules: this table is their one list (definition.JOIN_RULES, the editor's choices
# and their help, a docstring each, are read from it); graph.DEFAULT_JOIN names one of them.
JOINS: dict[str, Callable[[list[str]], str]] = {
    "all_success": join_all_success,
    "any_success": join_any_success,
    "all_done": join_all_done,
}
JOIN_RULES: tuple[str, ...] = tuple(JOINS)
assert DEFAULT_JOIN in JOINS, f"graph.DEFAULT_JOIN {DEFAULT_JOIN!r} is not a join rule"


def finish_status(states: Any) -> str | None:
    """Return the run's final status once every node is terminal, else None."""
    statuses = [s.status for s in states]
    if not all(s in NODE_TERMINAL for s in statuses):
        return None
    return R.FAILED if N.DEAD in statuses else R.SUCCEEDED


def replay_resets(graph: Graph, node_id: str, states: Mapping[str, NodeState]) -> list[str]:
    """Return the nodes a replay of `node_id` puts back to pending: its upstream_failed descendants."""
    below = graph.descendants(node_id)
    return [n for n in graph.order if n in below and states[n].status == N.UPSTREAM_FAILED]
