"""What a definition's placeholders name that nothing is sure to provide (core/contracts.py)."""

from __future__ import annotations

from typing import Any

import pytest

from workflows.core.contracts import (
    INPUT_UNDECLARED,
    UPSTREAM_MISSING_FIELD,
    UPSTREAM_NOT_PREDECESSOR,
    UPSTREAM_UNKNOWN_NODE,
    missing_path,
    template_gaps,
)
from workflows.core.definition import template_warnings


def chain(prompt: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """fetch -> summarise -> notify, summarise's prompt being `prompt`."""
    definition: dict[str, Any] = {
        "nodes": [
            {"id": "fetch", "handler": "noop", "config": {}},
            {"id": "summarise", "handler": "llm.chat", "config": {"messages": [{"content": prompt}]}},
            {"id": "notify", "handler": "noop", "config": {}},
        ],
        "edges": [{"source": "fetch", "target": "summarise"}, {"source": "summarise", "target": "notify"}],
    }
    if schema is not None:
        definition["input_schema"] = schema
    return definition


SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}}}
FETCHED = {"fetch": {"body": {"title": "t", "items": [1]}, "status": 200}}


@pytest.mark.parametrize(
    ("prompt", "schema", "outputs", "expected"),
    [
        ("{input.order_id}", None, {}, [(INPUT_UNDECLARED, "order_id")]),
        ("{input.order_id}", {"type": "object"}, {}, [(INPUT_UNDECLARED, "order_id")]),
        ("{input.order_id}", SCHEMA, {}, []),  # declared (an undeclared one is a definition error)
        ("{upstream.nowhere.x}", SCHEMA, {}, [(UPSTREAM_UNKNOWN_NODE, "nowhere")]),
        ("{upstream.notify.x}", SCHEMA, {}, [(UPSTREAM_NOT_PREDECESSOR, "notify")]),
        ("{upstream.fetch.body.title}", SCHEMA, FETCHED, []),
        ("{upstream.fetch.body.author}", SCHEMA, FETCHED, [(UPSTREAM_MISSING_FIELD, "body.author")]),
        ("{upstream.fetch.headers}", SCHEMA, FETCHED, [(UPSTREAM_MISSING_FIELD, "headers")]),
        ("{upstream.fetch.anything}", SCHEMA, {}, []),  # no known output: not checked
        ("{upstream.fetch.body.items.0}", SCHEMA, FETCHED, []),  # lists end the check
        ("{upstream.fetch}", SCHEMA, FETCHED, []),
        ("{secret.KEY} {other}", None, {}, []),
    ],
)
def test_template_gaps_name_what_nothing_provides(
    prompt: str, schema: dict[str, Any] | None, outputs: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    gaps = template_gaps(chain(prompt, schema), outputs)
    assert [(g.code, g.field) for g in gaps] == expected
    assert all(g.node == "summarise" and g.position == 1 for g in gaps)


def test_a_gap_message_names_the_node_and_the_field() -> None:
    (gap,) = template_gaps(chain("{upstream.fetch.body.author}"), FETCHED)
    assert "'summarise'" in gap.message and "`body.author`" in gap.message and "'fetch'" in gap.message


def test_warnings_carry_the_json_path_and_the_input_field_to_add() -> None:
    (issue,) = template_warnings(chain("Order {input.order_id} please"), {})
    assert issue.path == "nodes[1].config.messages[0].content"
    assert issue.node == "summarise"
    assert issue.as_problem()["input_field"] == "order_id"
    assert issue.code == INPUT_UNDECLARED


def test_unreadable_definitions_have_no_gaps() -> None:
    assert template_gaps("not a definition", {}) == []
    assert template_gaps({"nodes": "x", "edges": 3}, {}) == []


def test_missing_path_follows_objects_only() -> None:
    assert missing_path({"a": {"b": 1}}, ["a", "c"]) == "a.c"
    assert missing_path({"a": [1]}, ["a", "0", "x"]) is None
    assert missing_path("text", ["a"]) is None
