"""MCP servers for admins: register (create or replace), delete, and how a worker reaches one.

Every change is an audit entry about `mcp-server:NAME` (`mcp_server.set`, `mcp_server.deleted`).
A stdio server names a command of SWITCHYARD_MCP_STDIO_COMMANDS (the settings' allow-list);
its argv is read from the settings when the server is reached, so no command ever comes from
the browser or a definition. Header values may reference `{secret.NAME}`: the secret must
exist when the server is saved, and its value is read only by `connection` (in the worker,
or in the web process for an admin's refresh of the tool list), never stored or shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction

from workflows.core.agent import MCP_SERVER_PATTERN
from workflows.core.secretrefs import names_in
from workflows.mcp.client import Connection, McpFailed
from workflows.store import audit, secrets as store_secrets
from workflows.store.errors import Invalid, NotFound
from workflows.store.mcpservers import HTTP, STDIO, McpServer

TARGET = "mcp-server"
HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$")
MAX_HEADERS = 20
MAX_TIMEOUT_SECONDS = 600.0


@dataclass(frozen=True)
class ServerIn:
    """What an admin gives for a server (the API's body and the page's form alike)."""

    transport: str
    url: str = ""
    headers: dict[str, str] | None = None
    command: str = ""
    timeout_seconds: float = 30.0
    description: str = ""


def stdio_commands() -> dict[str, list[str]]:
    return dict(settings.SWITCHYARD["MCP_STDIO_COMMANDS"])


def check_name(name: str) -> None:
    if not re.match(MCP_SERVER_PATTERN, name):
        raise Invalid(
            f"name: a server's name is 1 to 40 lowercase letters, digits, - or _ (starting with a "
            f"letter or digit), not {name!r}."
        )


def check(given: ServerIn) -> None:
    """Refuse what cannot be saved, naming the field."""
    if given.transport not in (HTTP, STDIO):
        raise Invalid(f"transport: {HTTP!r} (streamable HTTP) or {STDIO!r}, not {given.transport!r}.")
    if not 0 < given.timeout_seconds <= MAX_TIMEOUT_SECONDS:
        raise Invalid(f"timeout_seconds: more than 0 and at most {MAX_TIMEOUT_SECONDS:g}.")
    if given.transport == STDIO:
        check_command(given)
    else:
        check_http(given)


def check_command(given: ServerIn) -> None:
    allowed = stdio_commands()
    if given.command not in allowed:
        names = ", ".join(sorted(allowed)) or "none: set SWITCHYARD_MCP_STDIO_COMMANDS"
        raise Invalid(
            f"command: choose one of the commands the settings allow ({names}), not {given.command!r}."
        )
    if given.url or given.headers:
        raise Invalid("url: a stdio server has no URL or headers; choose transport http for those.")


def check_http(given: ServerIn) -> None:
    parts = urlsplit(given.url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Invalid(f"url: an http:// or https:// URL of the server's MCP endpoint, not {given.url!r}.")
    if given.command:
        raise Invalid("command: only a stdio server has a command.")
    headers = given.headers or {}
    if len(headers) > MAX_HEADERS:
        raise Invalid(f"headers: at most {MAX_HEADERS}.")
    for key, value in headers.items():
        if not HEADER_NAME.match(key) or not isinstance(value, str) or "\n" in value or "\r" in value:
            raise Invalid(f"headers.{key}: a header name and a one-line text value.")
        missing = [n for n in names_in(value) if not store_secrets.Secret.objects.filter(name=n).exists()]
        if missing:
            raise Invalid(
                f"headers.{key}: there is no secret {missing[0]!r}; add it on the secrets page first."
            )


def set_server(name: str, given: ServerIn, actor: Any = None) -> McpServer:
    """Create the server `name` or replace how it is reached; its tool list is listed again later."""
    check_name(name)
    check(given)
    with transaction.atomic():
        row = McpServer.objects.select_for_update().filter(name=name).first() or McpServer(name=name)
        changed = (row.transport, row.url, row.command) != (given.transport, given.url, given.command)
        row.transport, row.url, row.command = given.transport, given.url, given.command
        row.headers = dict(given.headers or {})
        row.timeout_seconds = given.timeout_seconds
        row.description = given.description[:200]
        row.updated_by = audit.actor_label(actor)
        if changed:  # another server now: its old tools are not its tools
            row.tools, row.tools_listed_at, row.tools_error = [], None, ""
        row.save()
        audit.record_about(actor, "mcp_server.set", TARGET, name, transport=row.transport)
    return row


def get_server(name: str) -> McpServer:
    row = McpServer.objects.filter(name=name).first()
    if row is None:
        raise NotFound(f"There is no MCP server {name!r}.")
    return row


def delete_server(name: str, actor: Any = None) -> None:
    """Delete a server; agents offering its tools no longer get them (and their definitions are refused on save)."""
    with transaction.atomic():
        deleted, _ = McpServer.objects.filter(name=name).delete()
        if not deleted:
            raise NotFound(f"There is no MCP server {name!r}.")
        audit.record_about(actor, "mcp_server.deleted", TARGET, name)


def connection(row: McpServer) -> Connection:
    """How to reach the server now: secrets in its headers revealed, its command's argv read
    from the settings. Raise McpFailed naming what is missing."""
    if row.transport == STDIO:
        argv = stdio_commands().get(row.command)
        if not argv:
            raise McpFailed(
                f"MCP server {row.name!r}: command {row.command!r} is no longer allowed by the settings"
            )
        return Connection(row.name, STDIO, argv=tuple(argv), timeout_seconds=row.timeout_seconds)
    headers = {key: resolved(row.name, key, str(value)) for key, value in (row.headers or {}).items()}
    return Connection(row.name, HTTP, url=row.url, headers=headers, timeout_seconds=row.timeout_seconds)


def resolved(server: str, header: str, template: str) -> str:
    def value(match: re.Match[str]) -> str:
        found = store_secrets.reveal(match.group(1))
        if found is None:
            raise McpFailed(f"MCP server {server!r}: header {header}: there is no secret {match.group(1)!r}")
        return found

    return re.sub(r"\{secret\.([A-Za-z_][A-Za-z0-9_]{0,63})\}", value, template)
