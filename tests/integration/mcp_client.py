"""The official MCP Python client SDK against Switchyard's /mcp, for tests and the bench."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


@asynccontextmanager
async def connect(base_url: str, token: str) -> AsyncIterator[ClientSession]:
    """Yield an initialized client session to `base_url`/mcp with the API key `token`."""
    async with connect_with(f"{base_url}/mcp", {"Authorization": f"Bearer {token}"}) as session:
        yield session


@asynccontextmanager
async def connect_with(url: str, headers: dict[str, str]) -> AsyncIterator[ClientSession]:
    """Yield an initialized client session to the endpoint `url`, sending `headers`."""
    http = create_mcp_http_client(headers=headers)
    async with (
        http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session
