"""Talk to one MCP server with the official SDK (`mcp`): list its tools, call one.

Async (anyio, on a worker's slot loop or under `asyncio.run`); nothing here touches the ORM:
the caller hands in a `Connection` whose secrets are already revealed. Each call opens its
own session (initialize, the request, close): a session never outlives the step that made
it, so a worker killed mid-call leaves no session state behind, a stdio server's process is
stopped with the step (the SDK terminates it on close), and a server restarted between two
calls is simply reached again. `bench/mcp_bench.py` measures what that costs.

Every way a call can go wrong ends in `McpFailed` with a bounded message: the server down or
refusing, the whole exchange taking longer than its timeout (connect, initialize and the
call together: a server that never answers cannot hold the step longer), malformed JSON-RPC
(the SDK's parse errors, or no answer at all), a result over the size limit. A tool's own
error (`isError`) is an answer, not a failure: `Answer.error`.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import httpx2

from workflows.store.mcpservers import HTTP

if TYPE_CHECKING:
    from mcp.client.session import ClientSession

USER_AGENT = "Switchyard-MCP/1"
LIST_PAGES = 20  # pages of tools/list followed at most (a server paging for ever is cut here)
MESSAGE_CHARS = 500  # of an exception's text, in a failure's message


class McpFailed(Exception):
    """The call did not get an answer from the server (see the module docstring)."""


@dataclass(frozen=True)
class Connection:
    """How to reach a server for one exchange: secrets already revealed, never stored."""

    name: str
    transport: str
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    argv: tuple[str, ...] = ()
    timeout_seconds: float = 30.0


@dataclass(frozen=True)
class Answer:
    """A tool's answer: its result (JSON), or its own error (told to the model)."""

    result: Any = None
    error: str = ""


@asynccontextmanager
async def session(conn: Connection, traceparent: str | None = None) -> AsyncIterator[ClientSession]:
    """An initialized session with the server, over its transport."""
    # The SDK is imported here, by the first step that talks to a server: importing it takes
    # about a third of a second of every worker's and scheduler's start, most of which never call one.
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client

    if conn.transport == HTTP:
        headers = {"User-Agent": USER_AGENT, **conn.headers}
        if traceparent:
            headers["traceparent"] = traceparent
        timeout = httpx2.Timeout(conn.timeout_seconds)
        async with (
            httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
            streamable_http_client(conn.url, http_client=http) as (read, write, *_),
            ClientSession(read, write) as opened,
        ):
            await opened.initialize()
            yield opened
        return
    params = StdioServerParameters(command=conn.argv[0], args=list(conn.argv[1:]))
    async with stdio_client(params, errlog=sys.stderr) as (read, write), ClientSession(read, write) as opened:
        await opened.initialize()
        yield opened


async def list_tools(conn: Connection) -> list[dict[str, Any]]:
    """The server's tools as it describes them: {name, description, inputSchema}, every page."""
    found: list[dict[str, Any]] = []
    try:
        with anyio.fail_after(conn.timeout_seconds):
            async with session(conn) as opened:
                cursor = None
                for _ in range(LIST_PAGES):
                    params = {"cursor": cursor} if cursor else None
                    page = await opened.list_tools(params=params)
                    found += [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in page.tools]
                    cursor = page.next_cursor
                    if not cursor:
                        break
    except TimeoutError:
        raise McpFailed(
            f"MCP server {conn.name!r} did not list its tools within {conn.timeout_seconds:g} s"
        ) from None
    except Exception as exc:  # the server's boundary: every failure is named, none escapes
        raise McpFailed(f"MCP server {conn.name!r}: {described(exc)}") from None
    return found


async def call_tool(
    conn: Connection,
    tool: str,
    arguments: dict[str, Any],
    *,
    timeout_seconds: float,
    max_bytes: int,
    meta: dict[str, Any] | None = None,
    traceparent: str | None = None,
) -> Answer:
    """Call one tool; its result as JSON (bounded to `max_bytes`), or its own error.

    Raise McpFailed when no answer came (see the module docstring)."""
    seconds = max(min(timeout_seconds, conn.timeout_seconds), 0.001)
    where = f"MCP server {conn.name!r}, tool {tool!r}"
    try:
        with anyio.fail_after(seconds):
            async with session(conn, traceparent) as opened:
                answer = await opened.call_tool(tool, arguments, meta=meta)  # type: ignore[arg-type]  # a plain dict is its _meta
    except TimeoutError:
        raise McpFailed(f"{where}: no answer within {seconds:g} s") from None
    except Exception as exc:  # the server's boundary: every failure is named, none escapes
        raise McpFailed(f"{where}: {described(exc)}") from None
    blocks = [b.model_dump(by_alias=True, exclude_none=True, mode="json") for b in answer.content]
    if answer.is_error:
        return Answer(error=text_of(blocks) or "the tool reported an error without saying what")
    structured = answer.structured_content
    return Answer(
        result=bounded_result(structured if structured is not None else result_of(blocks), max_bytes)
    )


def result_of(blocks: list[dict[str, Any]]) -> Any:
    """A result's content as the model reads it: its text when it is all text, else the blocks
    (binary data replaced by its type and size)."""
    if all(b.get("type") == "text" for b in blocks):
        return "\n".join(str(b.get("text", "")) for b in blocks)
    return [summarised(b) for b in blocks]


def summarised(block: dict[str, Any]) -> dict[str, Any]:
    if "data" in block:
        size = math.floor(len(str(block["data"])) * 3 / 4)
        return {**{k: v for k, v in block.items() if k != "data"}, "data": f"[{size} bytes left out]"}
    return block


def text_of(blocks: list[dict[str, Any]]) -> str:
    return "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")


def bounded_result(result: Any, max_bytes: int) -> Any:
    """The result, or when its JSON passes `max_bytes` its start as text, saying it was cut."""
    text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, sort_keys=True)
    size = len(text.encode())
    if size <= max_bytes:
        return result
    kept = text.encode()[: max(0, max_bytes - 200)].decode(errors="ignore")
    return f"{kept} ... [result cut: it was {size} bytes, the limit is {max_bytes}]"


def described(exc: BaseException) -> str:
    """An exception as one bounded line; an exception group by its first leaf."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 3] + "..."
