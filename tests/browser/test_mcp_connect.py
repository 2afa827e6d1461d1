"""The API keys page tells how to connect an MCP client, and what it says works: the Cursor
snippet's URL and header, given to the official MCP client SDK, list the published workflows."""

from __future__ import annotations

import asyncio
import json
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from playwright.sync_api import expect

from tests.integration.conftest import node, publish
from tests.integration.mcp_client import connect_with


def test_a_new_keys_mcp_snippet_connects_a_client(page_as: Any, live_url: str, screenshot: Any) -> None:
    publish("shop", {"nodes": [node("a", "core.echo")], "edges": []})
    page = page_as("admin")
    page.goto(f"{live_url}/keys/")
    expect(page.locator("[data-mcp-url]")).to_have_text(f"{live_url}/mcp")
    page.fill(".key-form input[name=name]", "cursor")
    page.check(".key-form input[value=run]")
    page.click(".key-form button[type=submit]")
    plaintext = page.locator("#new-key").input_value()
    cursor = json.loads(page.locator("[data-client='Cursor'] pre").inner_text())["mcpServers"]["switchyard"]
    assert cursor["headers"]["Authorization"] == f"Bearer {plaintext}"
    desktop = page.locator("[data-client='Claude Desktop'] pre").inner_text()
    assert re.search(r'"mcp-remote",\s+"' + re.escape(f"{live_url}/mcp"), desktop)
    for width in (1280, 800):
        page.set_viewport_size({"width": width, "height": 900})
        page.locator("#mcp-connect").scroll_into_view_if_needed()
        screenshot(page, f"mcp-{width}")
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

    async def tool_names() -> set[str]:
        async with connect_with(cursor["url"], cursor["headers"]) as session:
            return {tool.name for tool in (await session.list_tools()).tools}

    # Playwright's sync API holds an event loop in this thread: the client runs in another.
    with ThreadPoolExecutor(1) as other:
        assert "shop" in other.submit(asyncio.run, tool_names()).result(60)
