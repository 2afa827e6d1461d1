"""The graph core: definition validation, the Graph, retry delays and checksums."""

from __future__ import annotations

import math
import sys
from typing import Any

import pytest

from workflows.core import engine
from workflows.core.conditions import Condition
from workflows.core.definition import (
    JOIN_RULES,
    DefinitionError,
    Issue,
    Limits,
    NodeSpec,
    canonical_json,
    checksum,
    normalise,
    parse_definition,
    validate_definition,
)
from workflows.core.graph import Edge, Graph, Node, RateLimit, RetryPolicy

HANDLERS: dict[str, dict[str, Any] | None] = {
    "demo.fetch_profile": None,
    "demo.sentiment": {
        "type": "object",
        "properties": {"model": {"type": "string"}, "threshold": {"type": "number", "maximum": 1}},
        "required": ["model"],
        "additionalProperties": False,
    },
    "http.request": {"type": "object", "properties": {"url": {"type": "string"}}},
}


def node(node_id: str, handler: str = "demo.fetch_profile", **fields: Any) -> dict[str, Any]:
    """Return a node definition with the given extra fields."""
    return {"id": node_id, "handler": handler, **fields}


def edge(source: str, target: str, when: str | None = None) -> dict[str, Any]:
    """Return an edge definition."""
    return {"source": source, "target": target, **({"when": when} if when is not None else {})}


def chain(*ids: str) -> dict[str, Any]:
    """Return a definition a -> b -> c ... over the given ids."""
    return {
        "nodes": [node(i) for i in ids],
        "edges": [edge(a, b) for a, b in zip(ids, ids[1:], strict=False)],
    }


def dag(pairs: str) -> dict[str, Any]:
    """Return a definition from 'a>b b>c', nodes in order of first mention."""
    links = [tuple(p.split(">")) for p in pairs.split()]
    ids = list(dict.fromkeys(n for link in links for n in link))
    return {"nodes": [node(i) for i in ids], "edges": [edge(a, b) for a, b in links]}


def issues_at(data: object, **kwargs: Any) -> dict[str, str]:
    """Return the issues found, as {path: message}."""
    return {issue.path: issue.message for issue in validate_definition(data, **kwargs)}


DIAMOND = dag("a>b a>c b>d c>d")


# --- schema errors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "path", "fragments"),
    [
        ([], "", ["must be a JSON object", "array"]),
        ("nodes", "", ["must be a JSON object", "string"]),
        ({}, "nodes", ["required"]),
        ({"nodes": []}, "nodes", ["must contain at least one node"]),
        ({"nodes": {}}, "nodes", ["valid list"]),
        ({"nodes": [node("a")], "colour": "red"}, "colour", ["unknown field 'colour'"]),
        ({"nodes": [node("a")], "description": 5}, "description", ["string"]),
        ({"nodes": [node("a")], "edges": "a>b"}, "edges", ["valid list"]),
        ({"nodes": [node("a"), 7]}, "nodes[1]", ["must be an object"]),
        ({"nodes": [{"handler": "h"}]}, "nodes[0].id", ["required"]),
        ({"nodes": [node("1abc")]}, "nodes[0].id", ["must start with a letter", "'1abc'"]),
        ({"nodes": [node("a" * 65)]}, "nodes[0].id", ["at most 64 characters"]),
        ({"nodes": [node("has space")]}, "nodes[0].id", ["letters, digits"]),
        ({"nodes": [{"id": "a"}]}, "nodes[0].handler", ["required", "node 'a'"]),
        ({"nodes": [node("a", "")]}, "nodes[0].handler", ["at least 1 character", "node 'a'"]),
        ({"nodes": [node("a", config=[1])]}, "nodes[0].config", ["valid dictionary", "node 'a'"]),
        ({"nodes": [node("a", colour=1)]}, "nodes[0].colour", ["unknown field 'colour'", "node 'a'"]),
        ({"nodes": [node("a", retry={"max_attempts": 0})]}, "nodes[0].retry.max_attempts", ["node 'a'"]),
        ({"nodes": [node("a", retry={"max_attempts": 51})]}, "nodes[0].retry.max_attempts", ["50"]),
        ({"nodes": [node("a", retry={"max_attempts": "3"})]}, "nodes[0].retry.max_attempts", ["integer"]),
        ({"nodes": [node("a", retry={"max_attempts": 2.5})]}, "nodes[0].retry.max_attempts", ["integer"]),
        ({"nodes": [node("a", retry={"backoff_seconds": -1})]}, "nodes[0].retry.backoff_seconds", ["0"]),
        ({"nodes": [node("a", retry={"jitter": 1.5})]}, "nodes[0].retry.jitter", ["less than or equal to 1"]),
        ({"nodes": [node("a", retry={"tries": 2})]}, "nodes[0].retry.tries", ["unknown field 'tries'"]),
        ({"nodes": [node("a", timeout_seconds=0)]}, "nodes[0].timeout_seconds", ["greater than 0"]),
        ({"nodes": [node("a", timeout_seconds=86401)]}, "nodes[0].timeout_seconds", ["86400"]),
        ({"nodes": [node("a", timeout_seconds=math.inf)]}, "", ["not valid JSON"]),
        ({"nodes": [node("a", timeout_seconds=True)]}, "nodes[0].timeout_seconds", ["number"]),
        ({"nodes": [node("a", queue="Fast")]}, "nodes[0].queue", ["lowercase letter", "'Fast'"]),
        ({"nodes": [node("a", join="first")]}, "nodes[0].join", ["'all_success'", "node 'a'"]),
        ({"nodes": [node("a", max_in_flight=0)]}, "nodes[0].max_in_flight", ["greater than or equal to 1"]),
        ({"nodes": [node("a", max_in_flight=10001)]}, "nodes[0].max_in_flight", ["10000"]),
        ({"nodes": [node("a", max_in_flight="2")]}, "nodes[0].max_in_flight", ["integer"]),
        (
            {"nodes": [node("a", rate_limit={"count": 0, "per_seconds": 1})]},
            "nodes[0].rate_limit.count",
            ["1"],
        ),
        ({"nodes": [node("a", rate_limit={"count": 5})]}, "nodes[0].rate_limit.per_seconds", ["required"]),
        (
            {"nodes": [node("a", rate_limit={"count": 5, "per_seconds": 0})]},
            "nodes[0].rate_limit.per_seconds",
            ["0.1"],
        ),
        ({"nodes": [node("a")], "edges": [{"source": "a"}]}, "edges[0].target", ["required"]),
        ({"nodes": [node("a")], "edges": [["a", "a"]]}, "edges[0]", ["must be an object"]),
        ({"nodes": [node("a")], "edges": [{**edge("a", "a"), "x": 1}]}, "edges[0].x", ["unknown field"]),
    ],
)
def test_schema_error_is_reported_at_its_json_path(data: object, path: str, fragments: list[str]) -> None:
    found = issues_at(data)
    assert path in found, found
    for fragment in fragments:
        assert fragment in found[path]


def test_join_rules_are_the_three_documented_ones() -> None:
    assert JOIN_RULES == ("all_success", "any_success", "all_done")
    for rule in JOIN_RULES:
        assert validate_definition({"nodes": [node("a", join=rule)]}) == []


def test_join_rules_are_read_from_the_engines_table() -> None:
    assert tuple(engine.JOINS) == JOIN_RULES
    assert NodeSpec.model_json_schema()["properties"]["join"]["enum"] == list(engine.JOINS)
    assert Node("a", "h").join in engine.JOINS
    assert parse_definition({"nodes": [node("a")]}).nodes["a"].join == Node("a", "h").join


# --- structural errors --------------------------------------------------------------------


def test_duplicate_node_id_is_reported_at_the_second_occurrence() -> None:
    found = issues_at({"nodes": [node("a"), node("b"), node("a")]})
    assert found == {"nodes[2].id": "duplicate node id 'a' (first used by nodes[0])"}


@pytest.mark.parametrize(
    ("bad_edge", "path", "fragment"),
    [
        (edge("ghost", "a"), "edges[1].source", "source 'ghost' is not a node"),
        (edge("a", "ghost"), "edges[1].target", "target 'ghost' is not a node"),
        (edge("a", "a"), "edges[1]", "edge a -> a is a self-loop"),
        (edge("a", "b"), "edges[1]", "duplicate edge a -> b (first given as edges[0])"),
    ],
)
def test_bad_edge_is_reported_naming_its_nodes(bad_edge: dict[str, Any], path: str, fragment: str) -> None:
    data = {"nodes": [node("a"), node("b")], "edges": [edge("a", "b"), bad_edge]}
    found = issues_at(data)
    assert list(found) == [path]
    assert fragment in found[path]


def test_edge_to_a_node_with_other_errors_is_not_called_unknown() -> None:
    data = {"nodes": [node("a"), node("b", queue="BAD")], "edges": [edge("a", "b")]}
    assert list(issues_at(data)) == ["nodes[1].queue"]


@pytest.mark.parametrize(
    ("pairs", "cycle"),
    [
        ("a>b b>a", "cycle: a -> b -> a"),
        ("a>b b>c c>a", "cycle: a -> b -> c -> a"),
        ("x>a a>b b>c c>d d>b", "cycle: b -> c -> d -> b"),
        ("c>a a>b b>c", "cycle: c -> a -> b -> c"),
    ],
)
def test_cycle_error_names_the_cycle_path(pairs: str, cycle: str) -> None:
    ids = tuple(cycle.removeprefix("cycle: ").split(" -> "))
    assert validate_definition(dag(pairs)) == [Issue("edges", cycle, "cycle", cycle=ids)]


def test_a_cycle_is_a_problem_with_its_node_ids_as_a_list() -> None:
    [issue] = validate_definition(dag("x>a a>b b>a"))
    assert issue.as_problem() == {
        "code": "cycle",
        "message": "cycle: a -> b -> a",
        "node": None,
        "field": "edges",
        "cycle": ["a", "b", "a"],
    }


@pytest.mark.parametrize(
    ("data", "field", "code", "node_id"),
    [
        (
            {"nodes": [node("a", retry={"max_attempts": 0})]},
            "nodes[0].retry.max_attempts",
            "invalid_value",
            "a",
        ),
        ({"nodes": [{"id": "a"}]}, "nodes[0].handler", "required", "a"),
        ({"nodes": [{**node("a"), "colour": "red"}]}, "nodes[0].colour", "unknown_field", "a"),
        ({"nodes": [node("a"), node("a")]}, "nodes[1].id", "duplicate_node_id", "a"),
        ({"nodes": [node("a", "nope")]}, "nodes[0].handler", "unknown_handler", "a"),
        ({"nodes": [node("a", "demo.sentiment", config={})]}, "nodes[0].config", "invalid_config", "a"),
        ({"nodes": [node("a")], "edges": [edge("a", "ghost")]}, "edges[0].target", "unknown_node", None),
        ({"nodes": [node("a")], "edges": [edge("a", "a")]}, "edges[0]", "self_loop", "a"),
        (
            {"nodes": [node("a"), node("b")], "edges": [edge("a", "b", "output >")]},
            "edges[0].when",
            "invalid_condition",
            None,
        ),
        ([], "", "not_an_object", None),
    ],
)
def test_each_problem_says_its_kind_its_field_and_its_node(
    data: object, field: str, code: str, node_id: str | None
) -> None:
    problems = [issue.as_problem() for issue in validate_definition(data, HANDLERS)]
    assert [(p["field"], p["code"], p["node"]) for p in problems] == [(field, code, node_id)]
    assert all("cycle" not in p for p in problems)


def test_every_disjoint_cycle_is_reported() -> None:
    found = validate_definition(dag("a>b b>a c>d d>e e>c"))
    assert [issue.message for issue in found] == ["cycle: a -> b -> a", "cycle: c -> d -> e -> c"]


def test_self_loop_is_not_also_reported_as_a_cycle() -> None:
    assert [issue.path for issue in validate_definition(dag("a>b b>b"))] == ["edges[1]"]


@pytest.mark.parametrize(
    ("when", "fragment"),
    [
        ("output.score >", "invalid syntax (column 15)"),
        ("__import__('os')", "function calls are not allowed"),
        ("output.__class__", "attribute '__class__'"),
    ],
)
def test_condition_syntax_error_is_reported_at_the_edge(when: str, fragment: str) -> None:
    data = {"nodes": [node("a"), node("b")], "edges": [edge("a", "b", when)]}
    found = issues_at(data)
    assert list(found) == ["edges[0].when"]
    assert fragment in found["edges[0].when"]


def test_every_problem_is_reported_at_once() -> None:
    data = {
        "nodes": [node("a"), node("b", retry={"max_attempts": 0}), node("a"), node("c", "nope")],
        "edges": [edge("a", "ghost"), edge("a", "b", "output >"), edge("b", "c"), edge("c", "b")],
        "extra": True,
    }
    found = issues_at(data, handlers=HANDLERS)
    assert set(found) == {
        "extra",
        "nodes[1].retry.max_attempts",
        "nodes[2].id",
        "nodes[3].handler",
        "edges[0].target",
        "edges[1].when",
        "edges",
    }
    assert found["edges"] == "cycle: b -> c -> b"


# --- limits -------------------------------------------------------------------------------


def test_too_many_nodes_is_reported_with_the_limit() -> None:
    found = issues_at(chain("a", "b", "c"), limits=Limits(max_nodes=2))
    assert found == {"nodes": "too many nodes: 3; the limit is 2"}


def test_too_many_edges_is_reported_with_the_limit() -> None:
    found = issues_at(chain("a", "b", "c"), limits=Limits(max_edges=1))
    assert found == {"edges": "too many edges: 2; the limit is 1"}


def test_oversized_config_is_reported_naming_the_node() -> None:
    data = {"nodes": [node("a"), node("big", config={"text": "x" * 100})]}
    found = issues_at(data, limits=Limits(max_config_bytes=50))
    assert list(found) == ["nodes[1].config"]
    assert "the limit is 50" in found["nodes[1].config"]
    assert "node 'big'" in found["nodes[1].config"]


def test_oversized_definition_is_refused_before_anything_else() -> None:
    data = {"nodes": [node("a", config={"text": "x" * 200})], "junk": 1}
    found = validate_definition(data, limits=Limits(max_definition_bytes=100))
    assert len(found) == 1
    assert found[0].path == ""
    assert "the limit is 100 bytes" in found[0].message


@pytest.mark.parametrize("build", [lambda inner: {"k": inner}, lambda inner: [inner]])
def test_deeply_nested_definition_is_refused_without_crashing(build: Any) -> None:
    deep: Any = {}
    for _ in range(5000):
        deep = build(deep)
    data = {"nodes": [node("a", config={"deep": deep})]}
    assert issues_at(data) == {"": "definition is nested more than 64 levels deep"}
    with pytest.raises(DefinitionError, match="nested more than 64 levels"):
        checksum(data)


def test_nesting_within_the_limit_is_accepted() -> None:
    deep: Any = 1
    for _ in range(60):
        deep = {"k": deep}
    assert validate_definition({"nodes": [node("a", config={"deep": deep})]}) == []


# --- handlers -----------------------------------------------------------------------------


def test_unknown_handler_is_reported_with_known_ones() -> None:
    found = issues_at({"nodes": [node("s", "demo.sentimen")]}, handlers=HANDLERS)
    message = found["nodes[0].handler"]
    assert "unknown handler 'demo.sentimen'" in message
    assert "registered handlers include demo.sentiment" in message
    assert "node 's'" in message


def test_unknown_handler_with_no_registry_says_so() -> None:
    found = issues_at({"nodes": [node("a")]}, handlers={})
    assert "no handlers are registered" in found["nodes[0].handler"]


def test_handlers_are_not_checked_when_no_registry_is_given() -> None:
    assert validate_definition({"nodes": [node("a", "anything.at_all")]}) == []


@pytest.mark.parametrize(
    ("config", "path", "fragment"),
    [
        ({}, "nodes[0].config", "'model' is a required property"),
        ({"model": 3}, "nodes[0].config.model", "3 is not of type 'string'"),
        ({"model": "m", "threshold": 2}, "nodes[0].config.threshold", "2 is greater than the maximum of 1"),
        ({"model": "m", "temperature": 1}, "nodes[0].config", "'temperature' was unexpected"),
    ],
)
def test_config_not_matching_the_handler_schema_is_reported_at_the_field(
    config: dict[str, Any], path: str, fragment: str
) -> None:
    found = issues_at({"nodes": [node("s", "demo.sentiment", config=config)]}, handlers=HANDLERS)
    assert list(found) == [path]
    assert fragment in found[path]
    assert "node 's'" in found[path]


def test_config_is_free_when_the_handler_has_no_schema() -> None:
    data = {"nodes": [node("a", config={"anything": [1, {"goes": True}]})]}
    assert validate_definition(data, handlers=HANDLERS) == []


def test_handler_with_an_invalid_schema_is_reported_on_the_handler() -> None:
    found = issues_at({"nodes": [node("a", "broken")]}, handlers={"broken": {"type": "nonsense"}})
    assert "handler 'broken' has an invalid config schema" in found["nodes[0].handler"]


def test_config_is_checked_even_when_other_fields_are_invalid() -> None:
    data = {"nodes": [node("s", "demo.sentiment", config={}, queue="BAD")]}
    assert set(issues_at(data, handlers=HANDLERS)) == {"nodes[0].queue", "nodes[0].config"}


# --- parse_definition and Graph -----------------------------------------------------------


def test_parse_definition_raises_with_every_issue() -> None:
    with pytest.raises(DefinitionError) as caught:
        parse_definition({"nodes": [node("a"), node("a")], "edges": [edge("a", "b")]})
    assert [i.path for i in caught.value.issues] == ["nodes[1].id", "edges[0].target"]
    assert str(caught.value) == (
        "nodes[1].id: duplicate node id 'a' (first used by nodes[0]); "
        "edges[0].target: target 'b' is not a node in this definition"
    )


def test_definition_error_is_a_value_error() -> None:
    assert issubclass(DefinitionError, ValueError)


def test_parsed_node_has_every_default_filled_in() -> None:
    graph = parse_definition({"nodes": [node("a")]})
    assert graph.nodes["a"] == Node(
        id="a",
        handler="demo.fetch_profile",
        config={},
        retry=RetryPolicy(max_attempts=1, backoff_seconds=1.0, backoff_max_seconds=300.0, jitter=0.1),
        timeout_seconds=300.0,
        queue="default",
        join="all_success",
    )


def test_parsed_node_keeps_its_own_settings() -> None:
    spec = node(
        "a",
        config={"url": "https://example.test"},
        retry={"max_attempts": 3, "backoff_seconds": 0.5, "backoff_max_seconds": 60, "jitter": 0.2},
        timeout_seconds=30,
        queue="llm",
        join="any_success",
    )
    parsed = parse_definition({"nodes": [spec]}).nodes["a"]
    assert parsed.retry == RetryPolicy(3, 0.5, 60.0, 0.2)
    assert (parsed.config, parsed.timeout_seconds, parsed.queue, parsed.join) == (
        {"url": "https://example.test"},
        30.0,
        "llm",
        "any_success",
    )


def test_parsed_edge_carries_its_condition() -> None:
    data = {"nodes": [node("a"), node("b")], "edges": [edge("a", "b", "output.score > 0.5")]}
    graph = parse_definition(data)
    assert graph.edges == (Edge("a", "b", Condition("output.score > 0.5")),)
    assert graph.has_conditions
    assert graph.incoming("b")[0].when is not None


@pytest.mark.parametrize("when", ["", "   "])
def test_blank_condition_means_no_condition(when: str) -> None:
    graph = parse_definition({"nodes": [node("a"), node("b")], "edges": [edge("a", "b", when)]})
    assert graph.edges[0].when is None
    assert not graph.has_conditions


def test_diamond_has_one_root_and_joins_at_the_end() -> None:
    graph = parse_definition(DIAMOND)
    assert graph.roots == ("a",)
    assert graph.order == ("a", "b", "c", "d")
    assert graph.predecessors("d") == ("b", "c")
    assert graph.successors("a") == ("b", "c")
    assert graph.predecessors("a") == ()
    assert graph.successors("d") == ()
    assert [e.source for e in graph.incoming("d")] == ["b", "c"]
    assert [e.target for e in graph.outgoing("a")] == ["b", "c"]
    assert graph.descendants("a") == {"b", "c", "d"}
    assert graph.descendants("b") == {"d"}
    assert graph.descendants("d") == set()


@pytest.mark.parametrize(
    ("data", "roots", "order"),
    [
        (chain("a"), ("a",), ("a",)),
        (chain("a", "b", "c"), ("a",), ("a", "b", "c")),
        (dag("b>a c>a"), ("b", "c"), ("b", "c", "a")),
        ({"nodes": [node("z"), node("y"), node("x")]}, ("z", "y", "x"), ("z", "y", "x")),
        (
            {"nodes": [node("late"), node("early")], "edges": [edge("early", "late")]},
            ("early",),
            ("early", "late"),
        ),
    ],
)
def test_roots_and_order_follow_definition_order(
    data: dict[str, Any], roots: tuple[str, ...], order: tuple[str, ...]
) -> None:
    graph = parse_definition(data)
    assert (graph.roots, graph.order) == (roots, order)


def test_wide_fan_out_lists_every_successor() -> None:
    leaves = [f"leaf_{i}" for i in range(200)]
    data = {"nodes": [node("root"), *map(node, leaves)], "edges": [edge("root", leaf) for leaf in leaves]}
    graph = parse_definition(data)
    assert graph.roots == ("root",)
    assert graph.successors("root") == tuple(leaves)
    assert graph.order == ("root", *leaves)
    assert graph.descendants("root") == set(leaves)
    assert all(graph.predecessors(leaf) == ("root",) for leaf in leaves)


def test_deep_chain_does_not_hit_the_recursion_limit() -> None:
    ids = [f"n{i}" for i in range(max(1000, sys.getrecursionlimit() + 10))]
    graph = parse_definition(chain(*ids))
    assert graph.order == tuple(ids)
    assert graph.roots == ("n0",)
    assert len(graph.descendants("n0")) == len(ids) - 1


def test_deep_cycle_is_found_without_recursion() -> None:
    ids = [f"n{i}" for i in range(1500)]
    data = chain(*ids)
    data["edges"].append(edge(ids[-1], ids[0]))
    [issue] = validate_definition(data)
    assert issue.message.startswith("cycle: n0 -> n1 -> ")
    assert issue.message.endswith("n1499 -> n0")


def test_order_puts_every_node_after_its_predecessors() -> None:
    graph = parse_definition(dag("a>d b>d c>e d>f e>f a>e"))
    position = {node_id: i for i, node_id in enumerate(graph.order)}
    assert all(position[e.source] < position[e.target] for e in graph.edges)


def test_unknown_node_lookup_raises_key_error() -> None:
    with pytest.raises(KeyError):
        parse_definition(DIAMOND).predecessors("ghost")


def test_graph_is_immutable() -> None:
    graph = parse_definition(DIAMOND)
    with pytest.raises(AttributeError):
        graph.order = ()  # type: ignore[misc]


def test_graph_built_directly_precomputes_the_same_views() -> None:
    nodes = {"a": Node("a", "h"), "b": Node("b", "h")}
    graph = Graph(nodes=nodes, edges=(Edge("a", "b"),))
    assert (graph.roots, graph.order, graph.successors("a")) == (("a",), ("a", "b"), ("b",))
    assert graph == parse_definition({"nodes": [node("a", "h"), node("b", "h")], "edges": [edge("a", "b")]})


# --- retry delay --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attempt", "expected"),
    [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (7, 32.0), (8, 60.0), (20, 60.0), (10_000, 60.0)],
)
def test_delay_grows_exponentially_up_to_the_cap(attempt: int, expected: float) -> None:
    policy = RetryPolicy(max_attempts=50, backoff_seconds=0.5, backoff_max_seconds=60, jitter=0.2)
    assert policy.delay(attempt, rand=0.5) == pytest.approx(expected)


@pytest.mark.parametrize(("rand", "factor"), [(0.0, 0.8), (0.25, 0.9), (0.5, 1.0), (0.999999, 1.2)])
def test_delay_jitter_stays_within_its_bounds(rand: float, factor: float) -> None:
    policy = RetryPolicy(max_attempts=5, backoff_seconds=10, backoff_max_seconds=300, jitter=0.2)
    assert policy.delay(1, rand) == pytest.approx(10 * factor, rel=1e-4)


def test_delay_with_full_jitter_is_never_negative() -> None:
    policy = RetryPolicy(max_attempts=5, backoff_seconds=1, backoff_max_seconds=10, jitter=1.0)
    assert [policy.delay(3, rand) for rand in (0.0, -5.0)] == [0.0, 0.0]


def test_delay_with_no_backoff_is_zero() -> None:
    assert RetryPolicy(3, 0.0, 300.0, 0.5).delay(5, 0.9) == 0.0


def test_delay_is_deterministic_for_the_same_rand() -> None:
    policy = RetryPolicy(5, 1.0, 300.0, 0.1)
    assert policy.delay(3, 0.37) == policy.delay(3, 0.37)


# --- normalise, canonical JSON, checksum --------------------------------------------------


def test_normalise_fills_every_default() -> None:
    assert normalise({"nodes": [node("a")], "edges": []}) == {
        "description": "",
        "nodes": [
            {
                "id": "a",
                "handler": "demo.fetch_profile",
                "config": {},
                "retry": {
                    "max_attempts": 1,
                    "backoff_seconds": 1.0,
                    "backoff_max_seconds": 300.0,
                    "jitter": 0.1,
                },
                "timeout_seconds": 300.0,
                "queue": "default",
                "join": "all_success",
            }
        ],
        "edges": [],
    }


def test_node_limits_are_kept_and_written_only_when_set() -> None:
    limited = {"nodes": [node("a", max_in_flight=3, rate_limit={"count": 10, "per_seconds": 60})]}
    parsed = parse_definition(limited).nodes["a"]
    assert (parsed.max_in_flight, parsed.rate_limit, parsed.limited) == (3, RateLimit(10, 60.0), True)
    written = normalise(limited)["nodes"][0]
    assert (written["max_in_flight"], written["rate_limit"]) == (3, {"count": 10, "per_seconds": 60.0})
    # Unset, they are left out: definitions saved before the fields existed keep their checksums.
    assert not {"max_in_flight", "rate_limit"} & set(normalise({"nodes": [node("a")]})["nodes"][0])
    assert parse_definition({"nodes": [node("a")]}).nodes["a"].limited is False


def test_normalise_checks_only_the_schema() -> None:
    assert normalise(dag("a>b b>a"))["edges"] == [
        {"source": "a", "target": "b", "when": None},
        {"source": "b", "target": "a", "when": None},
    ]
    with pytest.raises(DefinitionError, match="nodes\\[0\\].queue"):
        normalise({"nodes": [node("a", queue="X")]})


def test_canonical_json_sorts_keys_and_is_compact() -> None:
    assert canonical_json({"b": 1, "a": {"d": "é", "c": [1, 2]}}) == '{"a":{"c":[1,2],"d":"é"},"b":1}'


@pytest.mark.parametrize(
    "spelling",
    [
        {"edges": [edge("a", "b")], "nodes": [{"handler": "h", "id": "a"}, node("b", "h")]},
        {
            "description": "",
            "nodes": [
                node("a", "h", config={}, retry={"max_attempts": 1}, timeout_seconds=300, queue="default"),
                node("b", "h", join="all_success", retry={"jitter": 0.1, "backoff_seconds": 1}),
            ],
            "edges": [{"target": "b", "source": "a", "when": None}],
        },
        {"nodes": [node("a", "h"), node("b", "h")], "edges": [edge("a", "b", "  ")]},
    ],
)
def test_checksum_is_the_same_for_every_spelling_of_a_graph(spelling: dict[str, Any]) -> None:
    reference = {"nodes": [node("a", "h"), node("b", "h")], "edges": [edge("a", "b")]}
    assert checksum(spelling) == checksum(reference)


@pytest.mark.parametrize(
    "change",
    [
        {"nodes": [node("a", "h", timeout_seconds=30), node("b", "h")], "edges": [edge("a", "b")]},
        {"nodes": [node("a", "h"), node("b", "h")], "edges": [edge("a", "b", "output.ok")]},
        {"nodes": [node("a", "h"), node("b", "h")], "edges": []},
        {"nodes": [node("a", "h"), node("b", "h")], "edges": [edge("a", "b")], "description": "new"},
    ],
)
def test_checksum_changes_with_the_graph(change: dict[str, Any]) -> None:
    reference = {"nodes": [node("a", "h"), node("b", "h")], "edges": [edge("a", "b")]}
    assert checksum(change) != checksum(reference)


def test_checksum_is_prefixed_sha256_hex() -> None:
    value = checksum({"nodes": [node("a")]})
    assert value.startswith("sha256:")
    assert len(value) == len("sha256:") + 64
    int(value.removeprefix("sha256:"), 16)
