"""Plan a fork: which nodes of a new run are carried over from the run it forks, which run.

Pure: standard library only. A fork starts a new run on a version (the origin's, a newer
one, a draft's snapshot) from one node of an existing run (the fork point). The plan is a
split of the new version's nodes:

- **run**: the fork point and every node below it, any other node the origin did not
  finish as succeeded or skipped (still in flight, dead, cancelled, upstream failed) or
  cannot vouch for (absent from the origin's version, or defined differently there), and
  every node below those: they start pending in the new run and are executed.
- **carried**: every other node, created with the origin's status (succeeded or skipped) and
  output; never executed again, so no step before the fork point is paid for twice.

The fork point's ancestors are what its input is made of, so they must all be carried: an
ancestor that is defined differently in the new version (its node, or the edges into it)
or that the origin has not finished as succeeded or skipped refuses the fork, naming each
such node; the author forks at the earliest of them instead. A fork point the run does not
have is unknown; one the new version does not have is refused likewise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from workflows.core.definition import Issue
from workflows.core.graph import Graph
from workflows.core.states import NodeStatus

CARRIED_STATUSES = frozenset({NodeStatus.SUCCEEDED, NodeStatus.SKIPPED})


@dataclass(frozen=True)
class ForkPlan:
    """The new version's nodes split into those carried from the origin and those to run, in order."""

    node_id: str
    carried: tuple[str, ...]
    run: tuple[str, ...]


def ancestors(graph: Graph, node_id: str) -> set[str]:
    """Every node from which `node_id` can be reached, excluding itself."""
    seen: set[str] = set()
    stack = list(graph.predecessors(node_id))
    while stack:
        current = stack.pop()
        if current not in seen:
            seen.add(current)
            stack.extend(graph.predecessors(current))
    return seen


def is_same_node(origin: Graph, target: Graph, node_id: str) -> bool:
    """Whether a node is defined alike in both graphs: its own fields and the edges into it."""
    if node_id not in origin.nodes:
        return False
    return origin.nodes[node_id] == target.nodes[node_id] and set(origin.incoming(node_id)) == set(
        target.incoming(node_id)
    )


def fork_problems(
    origin: Graph, target: Graph, node_id: str, statuses: Mapping[str, str], version: int
) -> list[Issue]:
    """What refuses forking at `node_id` onto `target` (version number `version`); [] if nothing."""
    if node_id not in target.nodes:
        return [Issue("node_id", f"version {version} has no node {node_id!r}", "missing_node", node_id)]
    issues = []
    for upstream in (n for n in target.order if n in ancestors(target, node_id)):
        if upstream not in origin.nodes:
            why = f"is new in version {version}: it has no output in the run to carry over"
            issues.append(Issue("node_id", f"upstream node {upstream!r} {why}", "new_upstream", upstream))
        elif not is_same_node(origin, target, upstream):
            why = f"is defined differently in version {version}: its output cannot be carried over"
            issues.append(Issue("node_id", f"upstream node {upstream!r} {why}", "changed_upstream", upstream))
        elif statuses.get(upstream) not in CARRIED_STATUSES:
            status = statuses.get(upstream, "absent")
            why = f"is {status} in the run, not succeeded or skipped: there is no output to carry over"
            issues.append(
                Issue("node_id", f"upstream node {upstream!r} {why}", "unfinished_upstream", upstream)
            )
    return issues


def plan_fork(origin: Graph, target: Graph, node_id: str, statuses: Mapping[str, str]) -> ForkPlan:
    """Split `target`'s nodes into carried and run; call after `fork_problems` found none.

    A node runs if it is the fork point, if the origin cannot vouch for it, or if any of its
    predecessors runs (its input changes): one pass in topological order.
    """
    running: set[str] = set()
    for n in target.order:
        vouched = statuses.get(n) in CARRIED_STATUSES and is_same_node(origin, target, n)
        if n == node_id or not vouched or running.intersection(target.predecessors(n)):
            running.add(n)
    carried = tuple(n for n in target.order if n not in running)
    return ForkPlan(node_id, carried, tuple(n for n in target.order if n in running))
