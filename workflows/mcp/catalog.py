"""The tools of the registered MCP servers: listed, checked, cached in PostgreSQL, offered.

A server's tools are listed (`refresh`) when an admin asks, and again by a scheduler duty
when the last listing is older than MCP_TOOLS_TTL_SECONDS; a listing that fails keeps the
tools of the last good one and records why (`tools_error`). Each tool's input schema is
checked as JSON Schema (Draft 2020-12, as the agent loop validates arguments): a tool
whose schema is not valid is kept, marked unusable with the reason, offered to no model and
refused in a definition. `offered` and `choices` read the cache only: starting an agent's
attempt or drawing the editor never waits on a server.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import jsonschema
from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from workflows.core import agent as core
from workflows.mcp import client, servers
from workflows.store.mcpservers import McpServer

DESCRIPTION_CHARS = 1024
LISTED_AT_ONCE = 20  # stale servers one run of the duty lists again
STALE_CHECK_SECONDS = 60.0
_refresher: threading.Thread | None = None


def checked_tool(raw: dict[str, Any]) -> dict[str, Any]:
    """A listed tool as the cache keeps it: name, description, schema, usable, problem."""
    schema = raw.get("inputSchema")
    entry = {
        "name": str(raw.get("name", "")),
        "description": str(raw.get("description") or raw.get("title") or "")[:DESCRIPTION_CHARS],
        "schema": schema,
        "usable": True,
        "problem": "",
    }
    problem = schema_problem(schema)
    if problem:
        entry.update(usable=False, problem=problem)
    return entry


def schema_problem(schema: Any) -> str:
    """Why a tool's input schema cannot be offered ("" when it can)."""
    if not isinstance(schema, dict):
        return "its input schema is not a JSON object"
    if schema.get("type", "object") != "object":
        return f"its input schema describes {schema.get('type')!r}, not an object of arguments"
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        return f"its input schema is not valid JSON Schema at {where}: {core.bounded(exc.message, 300)}"
    return ""


def refresh(row: McpServer) -> McpServer:
    """List the server's tools now and store them (or why listing failed); return the row."""
    try:
        listed = asyncio.run(client.list_tools(servers.connection(row)))
    except client.McpFailed as exc:
        McpServer.objects.filter(pk=row.pk).update(tools_error=str(exc), tools_listed_at=timezone.now())
    else:
        tools = [checked_tool(raw) for raw in listed]
        McpServer.objects.filter(pk=row.pk).update(
            tools=tools, tools_error="", tools_listed_at=timezone.now()
        )
    row.refresh_from_db()
    return row


def refresh_stale() -> int:
    """The scheduler's duty: list again the servers whose tools are older than the TTL."""
    cutoff = timezone.now() - timedelta(seconds=float(settings.SWITCHYARD["MCP_TOOLS_TTL_SECONDS"]))
    stale = McpServer.objects.filter(Q(tools_listed_at__isnull=True) | Q(tools_listed_at__lt=cutoff))
    count = 0
    for row in stale.order_by("tools_listed_at")[:LISTED_AT_ONCE]:
        refresh(row)
        count += 1
    return count


def start_refresh() -> int:
    """The scheduler's duty: list the stale servers again in a thread of its own, one such
    thread at a time (a server may take its whole timeout: the scheduler's tick never waits)."""
    global _refresher
    if _refresher is not None and _refresher.is_alive():
        return 0
    _refresher = threading.Thread(target=refresh_in_thread, name="mcp-tool-lists", daemon=True)
    _refresher.start()
    return 1


def refresh_in_thread() -> None:
    try:
        refresh_stale()
    finally:
        connection.close()  # the thread's own connection


@dataclass(frozen=True)
class Offered:
    """One MCP tool offered to a model: its function spec and the schema of its arguments."""

    server: str
    tool: str
    spec: dict[str, Any]
    schema: dict[str, Any]


def offered(pairs: list[tuple[str, str]]) -> list[Offered]:
    """The (server, tool) pairs that can be offered now, in the order given (a server deleted or
    a tool gone or unusable since the definition was saved is simply not offered)."""
    rows = {row.name: row for row in McpServer.objects.filter(name__in={s for s, _ in pairs})}
    found = []
    for server, name in pairs:
        entry = rows[server].tool(name) if server in rows else None
        if entry is None or not entry.get("usable"):
            continue
        schema = dict(entry["schema"])
        spec = core.mcp_tool_spec(server, name, str(entry.get("description") or ""), schema)
        found.append(Offered(server, name, spec, schema))
    return found


def choices() -> list[dict[str, Any]]:
    """Every server with its tools, for the editor's picker (no headers, no commands)."""
    return [
        {
            "server": row.name,
            "description": row.description,
            "transport": row.transport,
            "listed_at": row.tools_listed_at,
            "error": row.tools_error,
            "tools": [
                {k: t.get(k) for k in ("name", "description", "usable", "problem")} for t in row.tools or ()
            ],
        }
        for row in McpServer.objects.all()
    ]
