"""What a definition's `mcp_tools` is refused for at save, publish and activation.

Each issue names the node and the field: an unknown server (`nodes[2].config.mcp_tools[0].server`),
a tool the server did not list or listed as unusable (`...mcp_tools[0].tools[1]`, with the
reason). What changes after publishing (a server deleted, a tool gone) is not offered to the
model at run time, and a call of it is told to the model (workflows/mcp/calls.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.core.definition import Issue
from workflows.core.graph import AGENT
from workflows.store.mcpservers import McpServer


def mcp_issues(definition: Any) -> list[Issue]:
    """Return the issues of a definition's MCP tools (none: fine)."""
    nodes = definition.get("nodes") if isinstance(definition, Mapping) else None
    wanted = [
        (n, node)
        for n, node in enumerate(nodes if isinstance(nodes, list) else [])
        if isinstance(node, Mapping)
        and node.get("handler") == AGENT
        and isinstance(node.get("config"), Mapping)
        and node["config"].get("mcp_tools")
    ]
    if not wanted:
        return []
    rows = {row.name: row for row in McpServer.objects.all()}
    return [issue for n, node in wanted for issue in node_issues(n, node, rows)]


def node_issues(n: int, node: Mapping[str, Any], rows: dict[str, McpServer]) -> list[Issue]:
    node_id, issues = str(node.get("id", "")), []
    for j, entry in enumerate(node["config"]["mcp_tools"]):
        if not isinstance(entry, Mapping):
            continue  # the schema's own check names it
        path = f"nodes[{n}].config.mcp_tools[{j}]"
        row = rows.get(str(entry.get("server")))
        if row is None:
            message = f"there is no MCP server {entry.get('server')!r}; an admin registers it first (node '{node_id}')"
            issues.append(Issue(f"{path}.server", message, "unknown_mcp_server", node_id))
            continue
        for k, tool in enumerate(entry.get("tools") or ()):
            problem = tool_problem(row, str(tool))
            if problem:
                issues.append(
                    Issue(f"{path}.tools[{k}]", f"{problem} (node '{node_id}')", "unknown_mcp_tool", node_id)
                )
    return issues


def tool_problem(row: McpServer, tool: str) -> str:
    entry = row.tool(tool)
    if entry is None:
        listed = "never listed its tools: refresh them" if row.tools_listed_at is None else "did not list it"
        return f"MCP server {row.name!r} has no tool {tool!r} (it {listed})"
    if not entry.get("usable"):
        return f"tool {tool!r} of MCP server {row.name!r} cannot be used: {entry.get('problem')}"
    return ""
