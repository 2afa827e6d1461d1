"""Sagas: what a failed or cancelled run undoes, in which order, and what it decides next.

Pure: standard library only. A node may name a `compensate` handler (with its own config,
retry policy and timeout): when its run fails or is cancelled after the node succeeded, the
node is undone by a **compensation step**, a task node of its own whose id is the node's id
and `~compensate` (no node id can contain `~`). Its row is a NodeRun of the run like any
other, so it is claimed, run by a worker, retried, killed into a dead letter and shown
exactly as a task; its handler is given the run input and, as `upstream`, the output of the
node it undoes (a reservation id to release, a charge id to refund).

Order: the steps run one at a time, in reverse order of their nodes' completion (the node
that finished last is undone first). A step that dies (out of attempts; its dead letter
waits for an operator) does not stop the others: the saga undoes what it can, and the run
ends `compensation_failed`; when every step succeeded it ends `compensated`. A failed or
cancelled run with nothing to undo simply stays failed or cancelled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from workflows.core.engine import Decision, EnqueueNode, FinishRun, KillNode, NodeState, RetryNode
from workflows.core.graph import COMPENSATE_SUFFIX, Graph, Node
from workflows.core.states import NodeStatus as N, RunStatus as R

IN_FLIGHT = frozenset({N.QUEUED, N.RUNNING, N.RETRYING})


def step_id(node_id: str) -> str:
    return f"{node_id}{COMPENSATE_SUFFIX}"


def is_step(node_id: str) -> bool:
    return node_id.endswith(COMPENSATE_SUFFIX)


def undone_by(node_id: str) -> str:
    """The node a step undoes (a node's own id for a node)."""
    return node_id.removesuffix(COMPENSATE_SUFFIX)


def step_node(graph: Graph, node_id: str) -> Node:
    """The Node of a node id of a run: a graph node, or a compensation step; KeyError if neither."""
    if not is_step(node_id):
        return graph.nodes[node_id]
    step = graph.nodes[undone_by(node_id)].compensate
    if step is None:
        raise KeyError(node_id)
    return step


def given_by(graph: Graph, node_id: str) -> tuple[str, ...]:
    """The nodes whose outputs a node (or a step: the node it undoes) is given."""
    return (undone_by(node_id),) if is_step(node_id) else graph.predecessors(node_id)


def steps_to_run(graph: Graph, succeeded: Sequence[str]) -> list[str]:
    """The compensation steps of a run whose nodes `succeeded` in this order: newest first."""
    return [step_id(n) for n in reversed(succeeded) if n in graph.nodes and graph.nodes[n].compensate]


def advance_steps(
    graph: Graph, steps: Sequence[str], states: Mapping[str, NodeState], rand: float = 0.5
) -> list[Decision]:
    """Decide the next move of a compensating run: one step at a time, in `steps` order.

    A failed step is retried while its budget lasts, else killed (and the next one starts);
    a step in flight is waited for; once every step is done the run ends.
    """
    decisions: list[Decision] = []
    dead = False
    for sid in steps:
        state = states[sid]
        if state.status == N.FAILED:
            policy = step_node(graph, sid).retry
            if state.tries < policy.max_attempts:
                return [*decisions, RetryNode(sid, state.tries, policy.delay(state.tries, rand))]
            decisions.append(KillNode(sid, state.tries))
            dead = True
        elif state.status == N.PENDING:
            return [*decisions, EnqueueNode(sid)]
        elif state.status in IN_FLIGHT:
            return decisions
        elif state.status == N.DEAD:
            dead = True
    return [*decisions, FinishRun(R.COMPENSATION_FAILED if dead else R.COMPENSATED)]
