"""How an MCP client connects: the snippets the API keys page shows, filled with the URL.

Desktop assistants that speak only stdio (Claude Desktop) reach a remote streamable-HTTP
server through the `mcp-remote` bridge from npm; editors and CLIs that speak streamable
HTTP themselves (Cursor, Claude Code, VS Code) take the URL and the header.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

PATH = "/mcp"  # where controlplane/asgi.py serves the endpoint
PLACEHOLDER = "sy_<prefix>_<secret>"


@dataclass(frozen=True)
class Snippet:
    client: str
    where: str
    text: str


def snippets(url: str, key: str = "") -> list[Snippet]:
    """Return the configuration of each kind of client for the endpoint `url` and API `key`."""
    bearer = f"Bearer {key or PLACEHOLDER}"
    remote = {
        "mcpServers": {
            "switchyard": {
                "command": "npx",
                "args": ["-y", "mcp-remote", url, "--header", "Authorization:${SWITCHYARD_AUTH}"],
                "env": {"SWITCHYARD_AUTH": bearer},
            }
        }
    }
    direct = {"mcpServers": {"switchyard": {"url": url, "headers": {"Authorization": bearer}}}}
    header = shlex.quote(f"Authorization: {bearer}")
    return [
        Snippet("Claude Desktop", "claude_desktop_config.json", json.dumps(remote, indent=2)),
        Snippet("Cursor", ".cursor/mcp.json", json.dumps(direct, indent=2)),
        Snippet(
            "Claude Code", "a shell", f"claude mcp add --transport http switchyard {url} --header {header}"
        ),
    ]
