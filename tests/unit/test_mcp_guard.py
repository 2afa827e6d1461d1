"""The MCP handlers' boundary (workflows/mcp_endpoint/tools.guarded): what escapes a handler
reaches the client without its text, which for PostgreSQL names hosts and ports."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from django.db import OperationalError
from mcp.shared.exceptions import MCPError

from workflows.mcp_endpoint.tools import guarded

LEAKY = 'connection to server at "10.9.8.7", port 5433 failed: Connection refused'


def run(method: str, exc: Exception) -> Any:
    async def handler(ctx: Any, params: Any) -> Any:
        raise exc

    return asyncio.run(guarded(handler)(SimpleNamespace(method=method), None))


def test_postgresql_away_during_a_call_is_a_tool_error_saying_how_to_find_the_run() -> None:
    result = run("tools/call", OperationalError(LEAKY))
    assert result.is_error
    text = result.content[0].text
    assert "PostgreSQL is unavailable" in text and "io.switchyard/idempotencyKey" in text
    assert "10.9.8.7" not in text


def test_postgresql_away_while_listing_is_an_error_without_the_host() -> None:
    with pytest.raises(MCPError) as raised:
        run("tools/list", OperationalError(LEAKY))
    assert "PostgreSQL is unavailable" in raised.value.error.message
    assert "10.9.8.7" not in raised.value.error.message


def test_anything_else_is_an_internal_error_without_its_text() -> None:
    with pytest.raises(MCPError) as raised:
        run("tools/call", RuntimeError("secret internals at /srv/x"))
    assert raised.value.error.code == -32603
    assert "/srv/x" not in raised.value.error.message
