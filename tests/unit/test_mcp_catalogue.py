"""MCP tool names from slugs, tool schemas from input schemas, and the client snippets
(workflows/mcp_server): pure functions, no database."""

from __future__ import annotations

import json
import re

import pytest

from workflows.mcp_server import catalogue, connection

CLIENT_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what Claude's and OpenAI's tool APIs accept


@pytest.mark.parametrize("slug", ["demo-profile", "a", "x_y-z", "q" * 64])
def test_a_short_slug_is_its_own_tool_name(slug: str) -> None:
    assert catalogue.tool_name(slug) == slug


def test_a_long_slug_keeps_a_prefix_and_a_hash_and_two_never_share_a_name() -> None:
    first, second = "a" * 90 + "-one", "a" * 90 + "-two"
    names = {catalogue.tool_name(first), catalogue.tool_name(second)}
    assert len(names) == 2
    assert all(CLIENT_NAME.match(name) and name.startswith("a" * 55 + "_") for name in names)


def test_characters_outside_the_clients_rules_become_underscores() -> None:
    assert catalogue.tool_name("café.menu") == "caf__menu"


def test_a_workflow_without_an_input_schema_takes_any_object() -> None:
    assert catalogue.input_schema(None) == {"type": "object", "additionalProperties": True}
    declared = {"properties": {"n": {"type": "integer"}}, "required": ["n"]}
    assert catalogue.input_schema(declared) == {"type": "object", **declared}


def test_the_fixed_tools_are_named_apart_from_workflows() -> None:
    assert all(CLIENT_NAME.match(t.name) and t.name.startswith("switchyard_") for t in catalogue.FIXED_TOOLS)


def test_only_listing_and_reading_runs_are_marked_read_only() -> None:
    read_only = {t.name for t in catalogue.FIXED_TOOLS if t.read_only}
    assert read_only == {catalogue.LIST_RUNS, catalogue.READ_RUN}


def test_the_snippets_carry_the_url_and_the_key() -> None:
    url, key = "https://sy.example/mcp", "sy_0123abcd_secret"
    by_client = {s.client: s.text for s in connection.snippets(url, key)}
    cursor = json.loads(by_client["Cursor"])["mcpServers"]["switchyard"]
    assert cursor == {"url": url, "headers": {"Authorization": f"Bearer {key}"}}
    desktop = json.loads(by_client["Claude Desktop"])["mcpServers"]["switchyard"]
    assert url in desktop["args"] and desktop["env"]["SWITCHYARD_AUTH"] == f"Bearer {key}"
    assert by_client["Claude Code"].endswith(f"--header 'Authorization: Bearer {key}'")


def test_without_a_key_the_snippets_show_where_it_goes() -> None:
    assert all(connection.PLACEHOLDER in s.text for s in connection.snippets("https://sy.example/mcp"))
