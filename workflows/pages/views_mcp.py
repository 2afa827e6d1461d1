"""The MCP servers page, for admins: the registered servers, their tools as last listed (unusable
ones with the reason), a form that registers or replaces one, and a button that lists a
server's tools again.

Thin: every change is one call into `workflows.mcp` (the API's own); a refused change
re-renders the page with the message beside the form (4xx), an accepted one redirects.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from monitoring.views.guards import requires
from workflows.mcp import catalog, servers
from workflows.store.errors import DomainError, Invalid
from workflows.store.mcpservers import McpServer

TEMPLATE = "mcp/servers.html"


def page_context(form: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "nav": "mcp",
        "rows": list(McpServer.objects.all()),
        "commands": sorted(servers.stdio_commands()),
        "form": form or {"transport": "http", "timeout_seconds": 30},
        **extra,
    }


def form_of(row: McpServer | None) -> dict[str, Any] | None:
    if row is None:
        return None
    headers = "\n".join(f"{k}: {v}" for k, v in (row.headers or {}).items())
    return {
        **{
            f: getattr(row, f)
            for f in ("name", "transport", "url", "command", "timeout_seconds", "description")
        },
        "headers": headers,
    }


def parsed_headers(text: str) -> dict[str, str]:
    """`Name: value` per line; raise DomainError naming a line without a colon."""
    headers = {}
    for line in (raw.strip() for raw in text.splitlines()):
        if not line:
            continue
        name, colon, value = line.partition(":")
        if not colon:
            raise Invalid(f"headers: write one header a line as Name: value, not {line!r}.")
        headers[name.strip()] = value.strip()
    return headers


def number(text: str) -> float:
    try:
        return float(text or 30)
    except ValueError:
        raise Invalid(f"timeout_seconds: a number of seconds, not {text!r}.") from None


@require_GET
@requires("manage_mcp")
def servers_page(request: HttpRequest) -> HttpResponse:
    editing = McpServer.objects.filter(name=request.GET.get("name", "")).first()
    return render(request, TEMPLATE, page_context(form_of(editing)))


@require_POST
@requires("manage_mcp")
def save_server(request: HttpRequest) -> HttpResponse:
    form = {
        k: request.POST.get(k, "").strip()
        for k in ("name", "transport", "url", "command", "timeout_seconds", "description", "headers")
    }
    try:
        given = servers.ServerIn(
            transport=form["transport"],
            url=form["url"] if form["transport"] == "http" else "",
            headers=parsed_headers(form["headers"]) if form["transport"] == "http" else {},
            command=form["command"] if form["transport"] == "stdio" else "",
            timeout_seconds=number(form["timeout_seconds"]),
            description=form["description"],
        )
        servers.set_server(form["name"], given, actor=request.user)
    except DomainError as exc:
        return render(request, TEMPLATE, page_context(form, error=exc.message), status=exc.http_status)
    messages.success(request, f"MCP server {form['name']} saved; refresh its tools to list them.")
    return redirect("mcp:page")


@require_POST
@requires("manage_mcp")
def refresh_server(request: HttpRequest, name: str) -> HttpResponse:
    try:
        row = catalog.refresh(servers.get_server(name))
    except DomainError as exc:
        messages.error(request, exc.message)
        return redirect("mcp:page")
    if row.tools_error:
        messages.error(request, f"Listing the tools of {name} failed: {row.tools_error}")
    else:
        messages.success(request, f"{name} lists {len(row.tools)} tool(s).")
    return redirect(f"/mcp-servers/#server-{name}")


@require_POST
@requires("manage_mcp")
def delete_server(request: HttpRequest, name: str) -> HttpResponse:
    try:
        servers.delete_server(name, actor=request.user)
    except DomainError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"MCP server {name} deleted.")
    return redirect("mcp:page")
