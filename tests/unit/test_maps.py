"""Map nodes in the pure core: the list a map runs over, and what validation refuses."""

from __future__ import annotations

from typing import Any

import pytest

from workflows.core import engine, maps
from workflows.core.definition import DefinitionError, parse_definition
from workflows.core.graph import MAP, TASK


def graph_of(**fields: Any) -> Any:
    return parse_definition({"nodes": [{"id": "each", "handler": "core.noop", **fields}]})


@pytest.mark.parametrize(
    ("expression", "run_input", "output", "items"),
    [
        ("input.documents", {"documents": [1, "two", {"three": 3}]}, None, [1, "two", {"three": 3}]),
        ("output.rows", {}, {"rows": []}, []),
        ("output.fetch.rows", {}, {"fetch": {"rows": ["a"]}}, ["a"]),
        ("[1, 2, input.x]", {"x": 3}, None, [1, 2, 3]),
    ],
)
def test_items_of_gives_the_list_the_expression_computes(
    expression: str, run_input: Any, output: Any, items: list[Any]
) -> None:
    assert maps.items_of(expression, run_input, output) == (items, "")


@pytest.mark.parametrize(
    ("value", "found"),
    [
        ("text", "a string"),
        ({"a": 1}, "a object"),
        (3, "a number"),
        (True, "a boolean"),
        (None, "null (or nothing)"),
    ],
)
def test_items_of_names_the_expression_and_the_type_it_found_when_not_a_list(value: Any, found: str) -> None:
    items, error = maps.items_of("input.documents", {"documents": value}, None)
    assert items == []
    assert error == f"map 'input.documents' gave {found}, not a list"


def test_items_of_refuses_more_than_the_limit_naming_it() -> None:
    assert maps.items_of("input.d", {"d": list(range(10_000))}, None)[1] == ""
    items, error = maps.items_of("input.d", {"d": list(range(10_001))}, None)
    assert (items, error) == ([], "map 'input.d' gave 10,001 items; a map runs at most 10,000")


def test_a_node_with_map_is_a_map_kind_that_waits_and_keeps_its_settings() -> None:
    graph = graph_of(map="input.documents", max_parallel=5, on_item_failure="continue")
    each = graph.nodes["each"]
    assert (each.kind, each.map, each.max_parallel, each.on_item_failure) == (
        MAP,
        "input.documents",
        5,
        "continue",
    )
    assert engine.start_node(graph, "each") == engine.WaitNode("each")
    assert graph_of().nodes["each"].kind == TASK
    assert (
        graph_of(map="input.x").nodes["each"].max_parallel,
        graph_of(map="input.x").nodes["each"].on_item_failure,
    ) == (10, "fail")


@pytest.mark.parametrize(
    ("fields", "path", "fragment"),
    [
        ({"map": "input.("}, "nodes[0].map", "is not a valid expression"),
        ({"map": "f(input)"}, "nodes[0].map", "function calls"),
        ({"map": "[" + ",".join(["1"] * 300) + "]"}, "nodes[0].map", "at most 500 characters"),
        ({"max_parallel": 4}, "nodes[0].max_parallel", "applies only to a map node"),
        ({"on_item_failure": "continue"}, "nodes[0].on_item_failure", "applies only to a map node"),
        ({"map": "input.x", "max_parallel": 0}, "nodes[0].max_parallel", "greater than or equal to 1"),
        ({"map": "input.x", "max_parallel": 1001}, "nodes[0].max_parallel", "less than or equal to 1000"),
        ({"map": "input.x", "on_item_failure": "skip"}, "nodes[0].on_item_failure", "'fail' or 'continue'"),
    ],
)
def test_validation_refuses_bad_map_fields_naming_the_field(
    fields: dict[str, Any], path: str, fragment: str
) -> None:
    with pytest.raises(DefinitionError) as caught:
        graph_of(**fields)
    issues = {issue.path: issue.message for issue in caught.value.issues}
    assert path in issues, issues
    assert fragment in issues[path]


def test_a_wait_node_cannot_map() -> None:
    with pytest.raises(DefinitionError) as caught:
        parse_definition(
            {"nodes": [{"id": "w", "handler": "wait.timer", "config": {"seconds": 1}, "map": "input.x"}]}
        )
    assert [i.path for i in caught.value.issues] == ["nodes[0].map"]
    assert "cannot map over items" in caught.value.issues[0].message


def test_a_definition_without_map_fields_keeps_its_normalised_form() -> None:
    from workflows.core.definition import normalise

    assert "map" not in normalise({"nodes": [{"id": "a", "handler": "core.noop"}]})["nodes"][0]
    assert (
        normalise({"nodes": [{"id": "a", "handler": "core.noop", "map": "input.x"}]})["nodes"][0]["map"]
        == "input.x"
    )


@pytest.mark.parametrize(
    ("policy", "dead", "outcome"),
    [("fail", 0, "succeeded"), ("fail", 1, "dead"), ("continue", 3, "succeeded")],
)
def test_map_outcome_follows_the_policy(policy: str, dead: int, outcome: str) -> None:
    assert maps.map_outcome(policy, dead) == outcome


def issues_of(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    with pytest.raises(DefinitionError) as caught:
        parse_definition({"nodes": nodes})
    return {issue.path: issue for issue in caught.value.issues}


def test_a_map_node_may_name_its_item_and_index_in_its_config() -> None:
    config = {"prompt": "Summarise {item.text} ({index} of {input.count}): {item}"}
    graph = graph_of(handler="llm.chat", map="input.documents", config=config)
    assert graph.nodes["each"].config == config


@pytest.mark.parametrize(
    ("config", "path", "placeholder"),
    [
        ({"prompt": "Summarise: {item.text}"}, "nodes[0].config.prompt", "{item.text}"),
        ({"json": {"rows": [{"at": "{index}"}]}}, "nodes[0].config.json.rows[0].at", "{index}"),
        ({"url": "https://x.test/{item}"}, "nodes[0].config.url", "{item}"),
    ],
)
def test_an_item_placeholder_outside_a_map_node_is_refused_naming_the_node_and_the_field(
    config: dict[str, Any], path: str, placeholder: str
) -> None:
    issues = issues_of([{"id": "summary", "handler": "llm.chat", "config": config}])
    assert list(issues) == [path]
    issue = issues[path]
    assert (issue.code, issue.node) == ("item_outside_map", "summary")
    assert issue.message.startswith(f"{placeholder} names a map item, but node 'summary' is not a map node")
    assert f"{path}: {placeholder}" in str(DefinitionError(list(issues.values())))


def test_a_child_run_with_map_is_no_map_node_so_its_input_cannot_name_an_item() -> None:
    node = {"id": "child", "handler": "workflow.run", "map": "input.x", "config": {"input": {"d": "{item}"}}}
    issues = issues_of([node])
    assert issues["nodes[0].config.input.d"].node == "child"


def test_a_compensate_step_cannot_name_an_item_even_in_a_map_node() -> None:
    node = {
        "id": "each",
        "handler": "core.noop",
        "map": "input.x",
        "config": {},
        "compensate": {"handler": "http.request", "config": {"url": "https://x.test/{item.id}"}},
    }
    issue = issues_of([node])["nodes[0].compensate.config.url"]
    assert "a compensate step runs once for the node and is given no item" in issue.message
    assert "(node 'each')" in issue.message
