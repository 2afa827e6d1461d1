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
