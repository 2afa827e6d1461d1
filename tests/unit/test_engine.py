"""The engine, table-driven over literal DAGs: no database, no Redis."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from workflows.core import engine
from workflows.core.definition import parse_definition
from workflows.core.engine import (
    EnqueueNode,
    FinishRun,
    KillNode,
    NodeState,
    RetryNode,
    SkipNode,
)
from workflows.core.graph import Graph
from workflows.core.states import NodeStatus, RunStatus

# Short names keep the tables below readable.
DEAD, FAILED, PENDING, QUEUED = NodeStatus.DEAD, NodeStatus.FAILED, NodeStatus.PENDING, NodeStatus.QUEUED
RUNNING, SKIPPED, SUCCEEDED = NodeStatus.RUNNING, NodeStatus.SKIPPED, NodeStatus.SUCCEEDED
UPSTREAM_FAILED = NodeStatus.UPSTREAM_FAILED


def dag(
    edges: str, joins: dict[str, str] | None = None, when: dict[str, str] | None = None, **retry: Any
) -> Graph:
    """Build a graph from 'a>b b>c' and optional per-node join rules and edge conditions."""
    pairs = [tuple(e.split(">")) for e in edges.split()]
    names = list(dict.fromkeys(n for pair in pairs for n in pair))
    joins, when = joins or {}, when or {}
    nodes = [
        {
            "id": n,
            "handler": "core.noop",
            "join": joins.get(n, "all_success"),
            "retry": retry or {"max_attempts": 1},
        }
        for n in names
    ]
    links = [
        {"source": a, "target": b, **({"when": when[f"{a}>{b}"]} if f"{a}>{b}" in when else {})}
        for a, b in pairs
    ]
    return parse_definition({"nodes": nodes, "edges": links})


def single(name: str, **retry: Any) -> Graph:
    return parse_definition(
        {"nodes": [{"id": name, "handler": "core.noop", "retry": retry or {"max_attempts": 1}}]}
    )


def states(graph: Graph, **given: str | NodeState) -> dict[str, NodeState]:
    out = {n: NodeState(PENDING) for n in graph.nodes}
    for name, value in given.items():
        out[name] = value if isinstance(value, NodeState) else NodeState(value, 1)
    return out


DIAMOND = dag("a>b a>c b>d c>d")


@pytest.mark.parametrize(
    ("graph", "given", "expected"),
    [
        (DIAMOND, {}, [EnqueueNode("a")]),
        (DIAMOND, {"a": RUNNING}, []),
        (DIAMOND, {"a": SUCCEEDED}, [EnqueueNode("b"), EnqueueNode("c")]),
        (DIAMOND, {"a": SUCCEEDED, "b": SUCCEEDED, "c": RUNNING}, []),
        (DIAMOND, {"a": SUCCEEDED, "b": SUCCEEDED, "c": SUCCEEDED}, [EnqueueNode("d")]),
        (
            DIAMOND,
            {"a": SUCCEEDED, "b": SUCCEEDED, "c": SUCCEEDED, "d": SUCCEEDED},
            [FinishRun(RunStatus.SUCCEEDED)],
        ),
        (DIAMOND, {"a": SUCCEEDED, "b": QUEUED, "c": QUEUED}, []),
    ],
    ids=["roots-start", "wait-for-root", "fan-out", "fan-in-waits", "fan-in-ready", "finish", "in-flight"],
)
def test_diamond_advances_step_by_step(graph: Graph, given: dict[str, str], expected: list[Any]) -> None:
    assert engine.advance(graph, states(graph, **given)) == expected


def test_wide_fan_out_enqueues_every_branch_at_once() -> None:
    graph = dag(" ".join(f"root>n{i}" for i in range(200)))
    decisions = engine.advance(graph, states(graph, root=SUCCEEDED))
    assert decisions == [EnqueueNode(f"n{i}") for i in range(200)]


def test_deep_chain_runs_one_node_after_another() -> None:
    graph = dag(" ".join(f"n{i}>n{i + 1}" for i in range(999)))
    done = {f"n{i}": SUCCEEDED for i in range(500)}
    assert engine.advance(graph, states(graph, **done)) == [EnqueueNode("n500")]


def test_failed_attempt_is_retried_while_the_budget_lasts() -> None:
    graph = single("a", max_attempts=3, backoff_seconds=1.0, jitter=0.0)
    decisions = engine.advance(graph, {"a": NodeState(FAILED, tries=2)})
    assert decisions == [RetryNode("a", 2, 2.0)]


def test_last_failed_attempt_kills_the_node_and_fails_the_run() -> None:
    graph = single("a", max_attempts=3)
    decisions = engine.advance(graph, {"a": NodeState(FAILED, tries=3)})
    assert decisions == [KillNode("a", 3), FinishRun(RunStatus.FAILED)]


def test_a_failure_no_retry_can_fix_kills_the_node_on_its_first_attempt() -> None:
    graph = single("a", max_attempts=5, backoff_seconds=1.0)
    decisions = engine.advance(graph, {"a": NodeState(FAILED, tries=1, retryable=False)})
    assert decisions == [KillNode("a", 1), FinishRun(RunStatus.FAILED)]


def test_killed_node_propagates_upstream_failed_in_the_same_pass() -> None:
    graph = dag("a>b b>c")
    decisions = engine.advance(graph, states(graph, a=NodeState(FAILED, tries=1)))
    assert decisions == [
        KillNode("a", 1),
        SkipNode("b", UPSTREAM_FAILED),
        SkipNode("c", UPSTREAM_FAILED),
        FinishRun(RunStatus.FAILED),
    ]


def test_independent_branch_keeps_running_after_a_death() -> None:
    graph = dag("a>b c>d")
    decisions = engine.advance(graph, states(graph, a=DEAD, c=SUCCEEDED))
    assert decisions == [SkipNode("b", UPSTREAM_FAILED), EnqueueNode("d")]


@pytest.mark.parametrize(
    ("join", "upstream", "expected"),
    [
        ("all_success", {"a": SUCCEEDED, "b": SUCCEEDED}, [EnqueueNode("c")]),
        ("all_success", {"a": SUCCEEDED, "b": RUNNING}, []),
        ("all_success", {"a": DEAD, "b": RUNNING}, [SkipNode("c", UPSTREAM_FAILED)]),
        ("all_success", {"a": SKIPPED, "b": SUCCEEDED}, [SkipNode("c", SKIPPED)]),
        ("any_success", {"a": SUCCEEDED, "b": RUNNING}, [EnqueueNode("c")]),
        ("any_success", {"a": DEAD, "b": RUNNING}, []),
        ("any_success", {"a": DEAD, "b": SKIPPED}, [SkipNode("c", UPSTREAM_FAILED)]),
        ("any_success", {"a": SKIPPED, "b": SKIPPED}, [SkipNode("c", SKIPPED)]),
        ("all_done", {"a": DEAD, "b": RUNNING}, []),
        ("all_done", {"a": DEAD, "b": SUCCEEDED}, [EnqueueNode("c")]),
        ("all_done", {"a": SKIPPED, "b": SKIPPED}, [SkipNode("c", SKIPPED)]),
        ("all_done", {"a": UPSTREAM_FAILED, "b": SKIPPED}, [EnqueueNode("c")]),
    ],
)
def test_join_rules(join: str, upstream: dict[str, str], expected: list[Any]) -> None:
    graph = dag("a>c b>c", joins={"c": join})
    decisions = [d for d in engine.advance(graph, states(graph, **upstream)) if not isinstance(d, FinishRun)]
    assert decisions == expected


def test_false_condition_skips_the_branch_and_skipping_propagates() -> None:
    graph = dag("a>b b>c a>d", when={"a>b": "output.score > 0.5"})
    given = states(graph, a=NodeState(SUCCEEDED, 1, {"score": 0.2}))
    assert set(engine.advance(graph, given)) == {
        SkipNode("b", SKIPPED),
        SkipNode("c", SKIPPED),
        EnqueueNode("d"),
    }


def test_true_condition_takes_the_branch() -> None:
    graph = dag("a>b", when={"a>b": "output.score > 0.5 and input.mode == 'live'"})
    given = states(graph, a=NodeState(SUCCEEDED, 1, {"score": 0.9}))
    assert engine.advance(graph, given, run_input={"mode": "live"}) == [EnqueueNode("b")]


def test_run_with_a_dead_node_fails_even_when_all_done_continues() -> None:
    graph = dag("a>c b>c", joins={"c": "all_done"})
    decisions = engine.advance(graph, states(graph, a=DEAD, b=SUCCEEDED, c=SUCCEEDED))
    assert decisions == [FinishRun(RunStatus.FAILED)]


def test_replay_resets_only_the_blocked_descendants() -> None:
    graph = dag("a>b b>c a>d x>y")
    given = states(
        graph, a=DEAD, b=UPSTREAM_FAILED, c=UPSTREAM_FAILED, d=UPSTREAM_FAILED, x=DEAD, y=UPSTREAM_FAILED
    )
    assert sorted(engine.replay_resets(graph, "a", given)) == ["b", "c", "d"]


def test_nodes_are_tasks_unless_told_and_a_ready_task_is_enqueued() -> None:
    graph = dag("a>b")
    assert {node.kind for node in graph.nodes.values()} == {"task"}
    assert engine.start_node(graph, "a") == EnqueueNode("a")


def test_a_ready_node_of_a_kind_the_engine_does_not_know_is_refused_by_name() -> None:
    graph = dag("a>b")
    graph.nodes["a"] = dataclasses.replace(graph.nodes["a"], kind="child.run")
    with pytest.raises(ValueError, match="'a' has kind 'child.run'"):
        engine.advance(graph, states(graph))


@pytest.mark.parametrize(
    ("graph", "node", "output", "expected"),
    [
        (dag("a>b b>c"), "a", {}, [("b", ())]),  # a link of a chain
        (dag("a>b a>c b>d c>d"), "a", {}, [("b", ()), ("c", ())]),  # fan-out: each has only a
        (dag("a>c b>c"), "a", {}, [("c", ("b",))]),  # fan-in: once b has succeeded too
        (dag("a>d b>d c>d"), "b", {}, [("d", ("a", "c"))]),
        (dag("a>c b>c", joins={"c": "any_success"}), "a", {}, []),  # other joins: the scheduler's
        (dag("a>c b>c", joins={"c": "all_done"}), "a", {}, []),
        (dag("a>c b>c", when={"b>c": "output.ok"}), "a", {}, []),  # a condition into the fan-in
        (dag("a>b", when={"a>b": "output.score > 0.5"}), "a", {"score": 0.9}, [("b", ())]),
        (dag("a>b", when={"a>b": "output.score > 0.5"}), "a", {"score": 0.1}, []),  # to be skipped
        (dag("a>b"), "b", {}, []),  # a leaf
    ],
)
def test_successors_to_follow_are_those_a_success_makes_ready_once_the_others_succeeded(
    graph: Graph, node: str, output: Any, expected: list[tuple[str, tuple[str, ...]]]
) -> None:
    assert engine.successors_to_follow(graph, node, output, None) == expected
