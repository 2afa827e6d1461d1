"""An MCP server written with the official Python SDK (`mcp`'s MCPServer, once FastMCP), for the
tests of Switchyard's MCP client: tools that note, are slow, fail, answer hugely, and one whose
input schema is not valid JSON Schema.

    python -m tests.fakes.mcp_server --port 8765        # streamable HTTP at /mcp
    python -m tests.fakes.mcp_server --stdio            # stdio

Every call of `note` appends one JSON line to the file MCP_FAKE_LOG names (when set): the
note, the idempotency key and traceparent the caller sent in `_meta`, and the `traceparent`
HTTP header (HTTP only), so a test counts how often a call really reached the server, across
processes.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("switchyard-test-tools")


def log_call(ctx: Context, note: str) -> None:
    path = os.environ.get("MCP_FAKE_LOG")
    if not path:
        return
    context = ctx.request_context
    meta = dict(context.meta or {}) if context.meta is not None else {}
    request = context.request
    header = (
        request.headers.get("traceparent") if request is not None and hasattr(request, "headers") else None
    )
    line = {
        "note": note,
        "key": meta.get("io.switchyard/idempotency-key"),
        "meta_traceparent": meta.get("traceparent"),
        "header_traceparent": header,
    }
    with open(path, "a") as log:
        log.write(json.dumps(line) + "\n")


@server.tool()
def note(note: str, ctx: Context) -> dict[str, Any]:
    """Take a note and give it back."""
    log_call(ctx, note)
    return {"noted": note}


@server.tool()
def whoami(ctx: Context) -> dict[str, Any]:
    """Say which `x-token` header the call came with (streamable HTTP; null over stdio)."""
    request = ctx.request_context.request
    token = request.headers.get("x-token") if request is not None and hasattr(request, "headers") else None
    return {"token": token}


@server.tool()
async def slow(seconds: float) -> str:
    """Answer after `seconds` seconds (awaited: the server goes on answering other calls)."""
    await anyio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def fail(reason: str) -> str:
    """Always fail, saying why."""
    raise ValueError(f"refused: {reason}")


@server.tool()
def huge(megabytes: int) -> str:
    """Answer with `megabytes` MB of text."""
    return "x" * (megabytes * 1024 * 1024)


@server.tool()
def broken(value: str) -> str:
    """A tool whose input schema is made invalid below."""
    return value


def break_schema() -> None:
    """Give `broken` an input schema that is not valid JSON Schema (a type that does not exist)."""
    tool = server._tool_manager.get_tool("broken")  # noqa: SLF001  (a test server's own tool)
    assert tool is not None
    tool.parameters = {"type": "object", "properties": {"value": {"type": "text"}}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--stdio", action="store_true")
    args = parser.parse_args()
    break_schema()
    if args.stdio:
        server.run("stdio")
    else:
        server.run("streamable-http", port=args.port)


if __name__ == "__main__":
    main()
