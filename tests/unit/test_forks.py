"""Planning a fork (workflows/core/forks.py): which nodes are carried over, which run, what refuses it."""

from __future__ import annotations

from typing import Any

from workflows.core.definition import parse_definition
from workflows.core.forks import fork_problems, plan_fork
from workflows.core.graph import Graph


def dag(edges: str, **configs: dict[str, Any]) -> Graph:
    """A graph from "a>b b>c" edges; a node's config from `configs` (by id)."""
    pairs = [e.split(">") for e in edges.split()]
    ids = list(dict.fromkeys(n for pair in pairs for n in pair))
    nodes = [{"id": n, "handler": "core.noop", "config": configs.get(n, {})} for n in ids]
    return parse_definition({"nodes": nodes, "edges": [{"source": s, "target": t} for s, t in pairs]})


CHAIN = "n1>n2 n2>n3 n3>n4 n4>n5"
DONE = {n: "succeeded" for n in ("n1", "n2", "n3", "n4", "n5")}


def test_a_fork_at_the_third_node_of_a_chain_carries_two_and_runs_three() -> None:
    graph = dag(CHAIN)
    assert not fork_problems(graph, graph, "n3", DONE, 1)
    plan = plan_fork(graph, graph, "n3", DONE)
    assert plan.carried == ("n1", "n2")
    assert plan.run == ("n3", "n4", "n5")


def test_a_sibling_branch_the_origin_finished_is_carried_and_one_it_did_not_runs() -> None:
    graph = dag("a>b a>c b>d c>d a>e")
    statuses = {"a": "succeeded", "b": "succeeded", "c": "succeeded", "d": "succeeded", "e": "dead"}
    plan = plan_fork(graph, graph, "b", statuses)
    assert plan.carried == ("a", "c")
    assert set(plan.run) == {"b", "d", "e"}


def test_a_node_below_one_that_runs_runs_too() -> None:
    old, new = dag("a>b a>x x>y"), dag("a>b a>x x>y", x={"changed": True})
    statuses = dict.fromkeys("abxy", "succeeded")
    plan = plan_fork(old, new, "b", statuses)
    assert plan.carried == ("a",)
    assert set(plan.run) == {"b", "x", "y"}


def test_a_version_that_changes_only_the_fork_point_and_below_can_take_the_fork() -> None:
    old, new = dag(CHAIN), dag(CHAIN, n3={"prompt": "new"}, n5={"more": 1})
    assert not fork_problems(old, new, "n3", DONE, 2)
    assert plan_fork(old, new, "n3", DONE).carried == ("n1", "n2")


def test_changed_or_new_upstream_nodes_refuse_the_fork_each_named() -> None:
    old = dag(CHAIN)
    new = dag("n0>n2 n1>n2 n2>n3 n3>n4 n4>n5", n1={"changed": True})
    issues = fork_problems(old, new, "n3", DONE, 2)
    assert {(i.node, i.code) for i in issues} == {
        ("n0", "new_upstream"),
        ("n1", "changed_upstream"),
        ("n2", "changed_upstream"),  # an edge into it was added
    }
    assert all(i.path == "node_id" and "version 2" in i.message for i in issues)


def test_an_upstream_node_the_origin_has_not_finished_refuses_the_fork() -> None:
    graph = dag(CHAIN)
    issues = fork_problems(graph, graph, "n3", {"n1": "succeeded", "n2": "running"}, 1)
    assert [(i.node, i.code) for i in issues] == [("n2", "unfinished_upstream")]
    assert "running" in issues[0].message


def test_a_version_without_the_fork_point_refuses_the_fork() -> None:
    issues = fork_problems(dag(CHAIN), dag("n1>n2"), "n3", DONE, 4)
    assert [(i.node, i.code) for i in issues] == [("n3", "missing_node")]
    assert "version 4 has no node 'n3'" in issues[0].message
