"""The immutable in-memory workflow graph: nodes, edges, retry policy and the DAG itself.

This module is part of the pure core: standard library only (plus ``workflows.core.conditions``),
so the same code runs in the web process, the scheduler and every worker, and tests run in
milliseconds. A ``Graph`` is built from a definition by ``workflows.core.definition``, which
validates it first.

Definition order matters: it breaks ties in ``Graph.roots`` and ``Graph.order`` and orders
``predecessors``.
"""

from __future__ import annotations

import graphlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from workflows.core.backoff import backoff_delay
from workflows.core.conditions import Condition
from workflows.core.flowcontrol import Concurrency, StartKey

DEFAULT_JOIN = "all_success"  # one of the engine's join rules (engine.JOINS)


@dataclass(frozen=True)
class RetryPolicy:
    """Say how often a node is attempted and how long to wait between attempts."""

    max_attempts: int = 1
    backoff_seconds: float = 1.0
    backoff_max_seconds: float = 300.0
    jitter: float = 0.1

    def delay(self, attempt: int, rand: float) -> float:
        """Return seconds to wait after attempt number ``attempt`` (1-based) failed.

        ``rand`` is a caller-drawn number in [0, 1): the core never draws randomness, so
        the same inputs always give the same delay. The result is the exponential backoff,
        capped, then spread by +/- ``jitter`` of itself; it is never negative.
        """
        return backoff_delay(
            attempt, rand, first=self.backoff_seconds, cap=self.backoff_max_seconds, jitter=self.jitter
        )


@dataclass(frozen=True)
class RateLimit:
    """At most ``count`` attempts of a node started in any ``per_seconds`` window."""

    count: int
    per_seconds: float


TASK = "task"  # call a handler once (see engine.start_node, runtime/kinds.py)
# Nodes that wait, holding no worker (core/waits.py): named like handlers in a definition,
# registered with their config schemas so the editor offers them; their kind is their name.
APPROVAL, EVENT, TIMER = "human.approval", "wait.event", "wait.timer"
WAIT_KINDS = (APPROVAL, EVENT, TIMER)
# A tool-calling loop run in a worker like a task, its turns and tool calls durable steps
# (core/agent.py): named like a handler, its kind is its name.
AGENT = "llm.agent"
# A node with a `map` expression runs its handler once per item of a list (core/maps.py).
MAP = "map"
# A child run (core/children.py): another workflow run as a run of its own; the node waits.
CHILD = "workflow.run"
# A compensation step's node id: its node's id and this suffix, which no node id can contain.
COMPENSATE_SUFFIX = "~compensate"


@dataclass(frozen=True)
class Node:
    """Describe one step of a workflow: which handler runs, with what config and policy."""

    id: str
    handler: str
    config: dict[str, Any] = field(default_factory=dict)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeout_seconds: float = 300.0
    queue: str = "default"
    join: str = DEFAULT_JOIN
    max_in_flight: int | None = None  # attempts of this node (any run) queued, running or waiting at once
    rate_limit: RateLimit | None = None  # attempts of this node (any run) started per window
    kind: str = TASK  # how the node is claimed, executed and finished (runtime/kinds.py)
    map: str | None = None  # a map node: the expression giving its list of items (core/maps.py)
    max_parallel: int = 10  # a map node: items queued or running at once
    on_item_failure: str = "fail"  # a map node: "fail" the node, or "continue" with failures marked
    # Its saga step (core/compensation.py): a task node `<id>~compensate`, run to undo this
    # node when its run fails or is cancelled after it succeeded.
    compensate: Node | None = None
    # At most `limit` attempts in flight per key value (core/flowcontrol.py): the node's own,
    # else its workflow's (scope "*"), copied onto every node when the graph is built.
    concurrency: Concurrency | None = None

    @property
    def limited(self) -> bool:
        """Whether a scheduler must admit this node's attempts (workflows/runtime/capacity.py)."""
        return self.max_in_flight is not None or self.rate_limit is not None or self.concurrency is not None


@dataclass(frozen=True)
class Edge:
    """Connect two nodes; ``when`` gates the edge on the source's output."""

    source: str
    target: str
    when: Condition | None = None


@dataclass(frozen=True)
class Graph:
    """Hold a validated DAG with its adjacency and a topological order precomputed.

    Construct it through ``parse_definition``; building one directly from a cyclic edge
    set raises ``graphlib.CycleError``. Lookups by an unknown node id raise ``KeyError``.
    """

    nodes: dict[str, Node]
    edges: tuple[Edge, ...]
    input_schema: dict[str, Any] | None = field(default=None, compare=False)  # see DocumentSpec
    debounce: StartKey | None = field(default=None, compare=False)  # on starts (runs/startkeys.py)
    singleton: StartKey | None = field(default=None, compare=False)
    roots: tuple[str, ...] = field(init=False, compare=False)
    order: tuple[str, ...] = field(init=False, compare=False)
    has_conditions: bool = field(init=False, compare=False)
    _incoming: dict[str, tuple[Edge, ...]] = field(init=False, repr=False, compare=False)
    _outgoing: dict[str, tuple[Edge, ...]] = field(init=False, repr=False, compare=False)
    _predecessors: dict[str, tuple[str, ...]] = field(init=False, repr=False, compare=False)
    _successors: dict[str, tuple[str, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        incoming = _group_edges(self.nodes, self.edges, by_target=True)
        outgoing = _group_edges(self.nodes, self.edges, by_target=False)
        object.__setattr__(self, "_incoming", incoming)
        object.__setattr__(self, "_outgoing", outgoing)
        object.__setattr__(
            self, "_predecessors", {n: tuple(e.source for e in es) for n, es in incoming.items()}
        )
        object.__setattr__(
            self, "_successors", {n: tuple(e.target for e in es) for n, es in outgoing.items()}
        )
        object.__setattr__(self, "roots", tuple(n for n in self.nodes if not incoming[n]))
        object.__setattr__(self, "order", _topological_order(self.nodes, self.edges))
        object.__setattr__(self, "has_conditions", any(e.when is not None for e in self.edges))

    def predecessors(self, node_id: str) -> tuple[str, ...]:
        """Return the sources of edges into a node, in edge order."""
        return self._predecessors[node_id]

    def successors(self, node_id: str) -> tuple[str, ...]:
        """Return the targets of edges out of a node, in edge order."""
        return self._successors[node_id]

    def incoming(self, node_id: str) -> tuple[Edge, ...]:
        """Return the edges into a node, in edge order."""
        return self._incoming[node_id]

    def outgoing(self, node_id: str) -> tuple[Edge, ...]:
        """Return the edges out of a node, in edge order."""
        return self._outgoing[node_id]

    def descendants(self, node_id: str) -> set[str]:
        """Return every node reachable from a node, excluding the node itself."""
        seen: set[str] = set()
        stack = list(self.successors(node_id))
        while stack:
            current = stack.pop()
            if current not in seen:
                seen.add(current)
                stack.extend(self.successors(current))
        return seen


def _group_edges(
    nodes: Mapping[str, Node], edges: Iterable[Edge], *, by_target: bool
) -> dict[str, tuple[Edge, ...]]:
    """Index edges by their target (or source), keeping edge order."""
    groups: dict[str, list[Edge]] = {node_id: [] for node_id in nodes}
    for edge in edges:
        groups[edge.target if by_target else edge.source].append(edge)
    return {node_id: tuple(group) for node_id, group in groups.items()}


def _topological_order(nodes: Iterable[str], edges: Iterable[Edge]) -> tuple[str, ...]:
    """Order nodes so each comes after its predecessors; ties follow definition order."""
    sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
    for node_id in nodes:
        sorter.add(node_id)
    for edge in edges:
        sorter.add(edge.target, edge.source)
    return tuple(sorter.static_order())
