"""A definition's input_schema: validated as a JSON schema with the definition, carried by the
Graph, and the run inputs it refuses reported per field (the paths a start form shows)."""

from __future__ import annotations

from typing import Any

import pytest

from workflows.core.definition import (
    check_run_input,
    checksum,
    normalise,
    parse_definition,
    validate_definition,
)

NODES = [{"id": "a", "handler": "core.noop"}]
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"user_id": {"type": "string", "minLength": 2}, "count": {"type": "integer"}},
    "required": ["user_id", "count"],
}


def test_a_valid_input_schema_is_accepted_and_carried_by_the_graph() -> None:
    definition = {"nodes": NODES, "input_schema": SCHEMA}
    assert validate_definition(definition) == []
    assert parse_definition(definition).input_schema == SCHEMA
    assert normalise(definition)["input_schema"] == SCHEMA


def test_a_definition_without_an_input_schema_keeps_its_checksum() -> None:
    assert "input_schema" not in normalise({"nodes": NODES})
    assert checksum({"nodes": NODES}) == checksum({"nodes": NODES, "input_schema": None})
    assert checksum({"nodes": NODES}) != checksum({"nodes": NODES, "input_schema": SCHEMA})


@pytest.mark.parametrize(
    ("schema", "path", "fragment"),
    [
        ({"type": "objekt"}, "input_schema.type", "is not valid under any of the given schemas"),
        ({"properties": {"n": {"minimum": "zero"}}}, "input_schema.properties.n.minimum", "'zero'"),
        ([1, 2], "input_schema", "valid dictionary"),
    ],
)
def test_an_invalid_input_schema_is_refused_naming_the_field(schema: Any, path: str, fragment: str) -> None:
    issues = validate_definition({"nodes": NODES, "input_schema": schema})
    assert [issue.path for issue in issues] == [path]
    assert fragment in issues[0].message


def test_run_input_problems_are_reported_per_field() -> None:
    issues = check_run_input(SCHEMA, {"user_id": "x"})
    assert [(i.path, i.code) for i in issues] == [
        ("input.count", "required"),
        ("input.user_id", "invalid_input"),
    ]
    assert issues[0].message == "is required" and "too short" in issues[1].message
    assert check_run_input(SCHEMA, {"user_id": "u-7", "count": 3}) == []
    assert check_run_input(None, {"anything": True}) == []


def test_nested_problems_keep_their_path() -> None:
    schema = {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "integer"}}}}
    issues = check_run_input(schema, {"items": [1, "two"]})
    assert [i.path for i in issues] == ["input.items[1]"]


def prompting(prompt: str) -> list[dict[str, Any]]:
    return [{"id": "ask", "handler": "core.noop", "config": {"prompt": prompt, "headers": ["{input.x}"]}}]


def test_a_placeholder_naming_a_field_the_schema_does_not_declare_is_reported_naming_node_and_field() -> None:
    definition = {
        "nodes": prompting("Where is {input.order_id}? For {input.user_id.name}."),
        "input_schema": SCHEMA,
    }
    issues = validate_definition(definition)
    assert [(i.path, i.code, i.node) for i in issues] == [
        ("nodes[0].config.prompt", "input_not_in_schema", "ask"),
        ("nodes[0].config.headers[0]", "input_not_in_schema", "ask"),
    ]
    assert "{input.order_id} names `order_id`, which the input schema does not declare" in issues[0].message
    assert (
        "add `order_id` to input_schema.properties" in issues[0].message
        and "(node 'ask')" in issues[0].message
    )


def test_placeholders_are_not_checked_without_a_schema_that_lists_its_properties() -> None:
    assert validate_definition({"nodes": prompting("{input.anything}")}) == []
    open_schema = {"type": "object", "description": "any object"}
    assert validate_definition({"nodes": prompting("{input.anything}"), "input_schema": open_schema}) == []
    declared = {"type": "object", "properties": {"anything": {}, "x": {}}}
    assert validate_definition({"nodes": prompting("{input.anything}"), "input_schema": declared}) == []
