"""Structural diffs between two definitions."""

from __future__ import annotations

import json
from typing import Any

import pytest

from workflows.core.definition import DefinitionError
from workflows.core.diff import EdgeChange, FieldChange, GraphDiff, NodeChange, diff_definitions


def node(node_id: str, **fields: Any) -> dict[str, Any]:
    """Return a node definition with a default handler."""
    return {"id": node_id, "handler": fields.pop("handler", "demo.step"), **fields}


def edge(source: str, target: str, **fields: Any) -> dict[str, Any]:
    """Return an edge definition."""
    return {"source": source, "target": target, **fields}


BASE: dict[str, Any] = {
    "nodes": [
        node("fetch", config={"url": "https://a.test", "headers": {"accept": "json"}}),
        node("score"),
        node("notify"),
    ],
    "edges": [edge("fetch", "score"), edge("score", "notify", when="output.score > 0.5")],
}


def with_changes(**changes: Any) -> dict[str, Any]:
    """Return BASE with top-level keys replaced."""
    return {**BASE, **changes}


def test_identical_definitions_give_an_empty_diff() -> None:
    diff = diff_definitions(BASE, json.loads(json.dumps(BASE)))
    assert diff.is_empty()
    assert diff == GraphDiff()


def test_reordered_keys_lists_and_spelled_out_defaults_give_an_empty_diff() -> None:
    spelled_out = {
        "edges": list(reversed(BASE["edges"])),
        "nodes": [
            {**BASE["nodes"][2], "retry": {"max_attempts": 1}, "timeout_seconds": 300.0},
            {"handler": "demo.step", "id": "score", "queue": "default", "join": "all_success", "config": {}},
            BASE["nodes"][0],
        ],
    }
    assert diff_definitions(BASE, spelled_out).is_empty()


def test_added_and_removed_nodes_and_edges_are_listed() -> None:
    new = with_changes(
        nodes=[*BASE["nodes"][:2], node("archive"), node("audit")],
        edges=[edge("fetch", "score"), edge("score", "archive"), edge("archive", "audit")],
    )
    diff = diff_definitions(BASE, new)
    assert diff.nodes_added == ("archive", "audit")
    assert diff.nodes_removed == ("notify",)
    assert diff.edges_added == (("score", "archive"), ("archive", "audit"))
    assert diff.edges_removed == (("score", "notify"),)
    assert diff.nodes_changed == () and diff.edges_changed == ()
    assert not diff.is_empty()


@pytest.mark.parametrize(
    ("changed_node", "expected"),
    [
        (node("score", handler="demo.other"), [FieldChange("handler", "demo.step", "demo.other")]),
        (node("score", queue="llm"), [FieldChange("queue", "default", "llm")]),
        (node("score", join="all_done"), [FieldChange("join", "all_success", "all_done")]),
        (node("score", timeout_seconds=30), [FieldChange("timeout_seconds", 300.0, 30.0)]),
        (
            node("score", retry={"max_attempts": 3, "jitter": 0.5}),
            [FieldChange("retry.jitter", 0.1, 0.5), FieldChange("retry.max_attempts", 1, 3)],
        ),
        (node("score", config={"model": "small"}), [FieldChange("config.model", None, "small")]),
    ],
)
def test_changed_node_lists_each_changed_field(
    changed_node: dict[str, Any], expected: list[FieldChange]
) -> None:
    new = with_changes(nodes=[BASE["nodes"][0], changed_node, BASE["nodes"][2]])
    assert diff_definitions(BASE, new).nodes_changed == (NodeChange("score", tuple(expected)),)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            {"url": "https://b.test", "headers": {"accept": "json"}},
            [FieldChange("config.url", "https://a.test", "https://b.test")],
        ),
        (
            {"url": "https://a.test", "headers": {"accept": "xml"}},
            [FieldChange("config.headers.accept", "json", "xml")],
        ),
        (
            {"url": "https://a.test", "headers": {"accept": "json", "x-trace": "1"}},
            [FieldChange("config.headers.x-trace", None, "1")],
        ),
        ({"url": "https://a.test"}, [FieldChange("config.headers.accept", "json", None)]),
        (
            {"url": "https://a.test", "headers": {}},
            [FieldChange("config.headers.accept", "json", None)],
        ),
        (
            {"url": "https://a.test", "headers": {"accept": "json"}, "retries": None},
            [FieldChange("config.retries", None, None)],
        ),
        (
            {"url": "https://a.test", "headers": {"accept": "json"}, "tags": [1, 2]},
            [FieldChange("config.tags", None, [1, 2])],
        ),
    ],
)
def test_config_changes_are_reported_per_nested_field(
    config: dict[str, Any], expected: list[FieldChange]
) -> None:
    new = with_changes(nodes=[node("fetch", config=config), *BASE["nodes"][1:]])
    [change] = diff_definitions(BASE, new).nodes_changed
    assert change == NodeChange("fetch", tuple(expected))


def test_values_are_compared_as_json_so_one_and_true_differ() -> None:
    old = {"nodes": [node("a", config={"flag": 1})]}
    new = {"nodes": [node("a", config={"flag": True})]}
    assert diff_definitions(old, new).nodes_changed == (
        NodeChange("a", (FieldChange("config.flag", 1, True),)),
    )


def test_changed_edge_condition_is_reported() -> None:
    new = with_changes(edges=[edge("fetch", "score", when="output.ok"), BASE["edges"][1]])
    diff = diff_definitions(BASE, new)
    assert diff.edges_changed == (EdgeChange("fetch", "score", (FieldChange("when", None, "output.ok"),)),)
    assert diff.edges_added == () and diff.edges_removed == ()


def test_description_is_not_part_of_the_diff() -> None:
    assert diff_definitions(BASE, with_changes(description="new words")).is_empty()


def test_nested_config_fields_are_flattened_with_dots() -> None:
    deep: dict[str, Any] = {"leaf": 1}
    for _ in range(40):
        deep = {"k": deep}
    old = {"nodes": [node("a", config={})]}
    new = {"nodes": [node("a", config=deep)]}
    [change] = diff_definitions(old, new).nodes_changed[0].changes
    assert change == FieldChange("config" + ".k" * 40 + ".leaf", None, 1)


def test_emptied_object_is_reported_by_its_removed_fields() -> None:
    old = {"nodes": [node("a", config={"headers": {"accept": "json", "x": "1"}})]}
    new = {"nodes": [node("a", config={"headers": {}})]}
    [change] = diff_definitions(old, new).nodes_changed
    assert [c.field for c in change.changes] == ["config.headers.accept", "config.headers.x"]
    assert [c.field for c in diff_definitions(new, old).nodes_changed[0].changes] == [
        "config.headers.accept",
        "config.headers.x",
    ]


def test_diff_of_an_invalid_definition_raises_definition_error() -> None:
    with pytest.raises(DefinitionError):
        diff_definitions(BASE, {"nodes": "nope"})


def test_as_dict_is_json_ready() -> None:
    new = {
        "nodes": [node("fetch", config={"url": "https://b.test"}), node("score"), node("extra")],
        "edges": [edge("fetch", "score", when="output.ok"), edge("score", "extra")],
    }
    data = diff_definitions(BASE, new).as_dict()
    assert json.loads(json.dumps(data)) == data
    assert data == {
        "nodes_added": ["extra"],
        "nodes_removed": ["notify"],
        "nodes_changed": [
            {
                "node_id": "fetch",
                "changes": [
                    {"field": "config.headers.accept", "old": "json", "new": None},
                    {"field": "config.url", "old": "https://a.test", "new": "https://b.test"},
                ],
            }
        ],
        "edges_added": [{"source": "score", "target": "extra"}],
        "edges_removed": [{"source": "score", "target": "notify"}],
        "edges_changed": [
            {
                "source": "fetch",
                "target": "score",
                "changes": [{"field": "when", "old": None, "new": "output.ok"}],
            }
        ],
    }


def test_empty_diff_as_dict_has_every_key_empty() -> None:
    assert all(value == [] for value in GraphDiff().as_dict().values())
