"""MCP tools as the agent core sees them: names offered to the model, what a config offers."""

from __future__ import annotations

import re

from workflows.core import agent as core

OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def test_an_mcp_tool_is_offered_under_a_name_the_chat_api_accepts() -> None:
    assert core.mcp_function_name("github", "search_issues") == "mcp__github__search_issues"
    assert core.mcp_function_name("files", "read.file/v2") == "mcp__files__read_file_v2"
    long_a = core.mcp_function_name("s", "a" * 80)
    long_b = core.mcp_function_name("s", "a" * 79 + "b")
    unicode = core.mcp_function_name("s", "résumé")
    assert all(OPENAI_NAME.match(n) for n in (long_a, long_b, unicode))
    assert long_a != long_b, "a hash keeps two long names apart"


def test_a_config_offers_its_mcp_tools_in_order_and_they_change_the_loops_fingerprint() -> None:
    config = {
        "tools": ["demo.calculator"],
        "mcp_tools": [{"server": "gh", "tools": ["a", "b"]}, {"server": "fs", "tools": ["read"]}],
    }
    assert core.mcp_tools_of(config) == [("gh", "a"), ("gh", "b"), ("fs", "read")]
    assert core.offered_names(config) == ["demo.calculator", "mcp:gh/a", "mcp:gh/b", "mcp:fs/read"]
    without = core.offered_names({"tools": ["demo.calculator"]})
    assert core.fingerprint("p", "m", [], without) != core.fingerprint(
        "p", "m", [], core.offered_names(config)
    )


def test_the_agent_schema_takes_mcp_tools_as_server_and_tool_names() -> None:
    prop = core.agent_schema([])["properties"]["mcp_tools"]
    assert prop["x-picker"] == "mcp-tools"
    assert prop["items"]["required"] == ["server", "tools"]
