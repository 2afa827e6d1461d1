"""MCP servers, for admins: register (create or replace), list, read, delete, list their tools again;
and the tools of every server, for the editor's agent form (anyone who may view).

The bodies and answers are declared here, beside their only views. A header's value is
given back as it was written (`{secret.NAME}` references, never a revealed value); a stdio
server names a command of the settings' allow-list, whose argv is never shown.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from ninja import Path, Router, Status
from pydantic import Field
from typing_extensions import TypedDict

from workflows.api.auth import ApiRequest, allowed
from workflows.api.inputs import Body
from workflows.api.schema import refuses
from workflows.core.agent import MCP_SERVER_PATTERN
from workflows.mcp import catalog, servers
from workflows.store.mcpservers import McpServer

router = Router(tags=["mcp servers"])
Server = Annotated[str, Path(pattern=MCP_SERVER_PATTERN, description="The server's name.")]


class ServerIn(Body):
    transport: str = Field(description="`http` (streamable HTTP) or `stdio`.")
    url: str = Field("", max_length=2000, description="http: the server's MCP endpoint.")
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="http: headers sent with every request; values may hold {secret.NAME}.",
    )
    command: str = Field("", max_length=100, description="stdio: a name of SWITCHYARD_MCP_STDIO_COMMANDS.")
    timeout_seconds: float = Field(30.0, description="Bounds each exchange (connect, initialize, the call).")
    description: str = Field("", max_length=200)


class ToolOut(TypedDict):
    name: str
    description: str
    usable: bool
    problem: str
    input_schema: Any


class ServerOut(TypedDict):
    name: str
    description: str
    transport: str
    url: str
    headers: dict[str, str]
    command: str
    timeout_seconds: float
    tools: list[ToolOut]
    tools_listed_at: datetime | None
    tools_error: str
    updated_at: datetime
    updated_by: str


class PickerToolOut(TypedDict):
    name: str
    description: str
    usable: bool
    problem: str


class PickerServerOut(TypedDict):
    server: str
    description: str
    transport: str
    listed_at: datetime | None
    error: str
    tools: list[PickerToolOut]


def server_out(row: McpServer) -> ServerOut:
    tools: list[ToolOut] = [
        {
            "name": str(t.get("name")),
            "description": str(t.get("description") or ""),
            "usable": bool(t.get("usable")),
            "problem": str(t.get("problem") or ""),
            "input_schema": t.get("schema"),
        }
        for t in row.tools or ()
    ]
    return {
        "name": row.name,
        "description": row.description,
        "transport": row.transport,
        "url": row.url,
        "headers": dict(row.headers or {}),
        "command": row.command,
        "timeout_seconds": row.timeout_seconds,
        "tools": tools,
        "tools_listed_at": row.tools_listed_at,
        "tools_error": row.tools_error,
        "updated_at": row.updated_at,
        "updated_by": row.updated_by,
    }


@router.get("/mcp-servers", response=list[ServerOut], auth=allowed("manage_mcp"), summary="List MCP servers")
def list_mcp_servers(request: ApiRequest) -> Any:
    """List the registered MCP servers with their tools as last listed."""
    return [server_out(row) for row in McpServer.objects.all()]


@router.put(
    "/mcp-servers/{server}",
    response={200: ServerOut},
    auth=allowed("manage_mcp"),
    summary="Register an MCP server",
)
def set_mcp_server(request: ApiRequest, server: Server, body: ServerIn) -> Any:
    """Register the server or replace how it is reached (then list its tools: refresh)."""
    given = servers.ServerIn(**body.model_dump())
    return Status(200, server_out(servers.set_server(server, given, actor=request.auth)))


@router.get(
    "/mcp-servers/{server}", response=ServerOut, auth=allowed("manage_mcp"), summary="Read an MCP server"
)
@refuses(404)
def read_mcp_server(request: ApiRequest, server: Server) -> Any:
    """Read a server: how it is reached and its tools as last listed (unusable ones with the reason)."""
    return server_out(servers.get_server(server))


@router.delete(
    "/mcp-servers/{server}", response={204: None}, auth=allowed("manage_mcp"), summary="Delete an MCP server"
)
@refuses(404)
def delete_mcp_server(request: ApiRequest, server: Server) -> Any:
    """Delete a server; agents stop being offered its tools."""
    servers.delete_server(server, actor=request.auth)
    return Status(204, None)


@router.post(
    "/mcp-servers/{server}/refresh",
    response=ServerOut,
    auth=allowed("manage_mcp"),
    summary="List an MCP server's tools again",
)
@refuses(404)
def refresh_mcp_server(request: ApiRequest, server: Server) -> Any:
    """Ask the server for its tools now (within its timeout); a failure is kept in `tools_error`."""
    return server_out(catalog.refresh(servers.get_server(server)))


@router.get("/mcp-tools", response=list[PickerServerOut], auth=allowed("view"), summary="MCP tools to offer")
def list_mcp_tools(request: ApiRequest) -> Any:
    """Every server's tools, for the editor's agent form (no headers, no commands)."""
    return catalog.choices()
