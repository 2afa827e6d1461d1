"""MCP servers registered by admins (workflows/mcp): how to reach each, and its tools as last listed.

A server is reached over streamable HTTP (`url`, `headers` whose values may hold
`{secret.NAME}`, resolved only in the worker at call time) or over stdio (`command`: a name
of SWITCHYARD_MCP_STDIO_COMMANDS, never an argv from a browser or a definition). `tools` is
the cache of its last listing: one entry per tool, `{name, description, schema, usable,
problem}` (a tool whose input schema is not valid JSON Schema is kept, unusable, with the
reason), refreshed by an admin or when older than MCP_TOOLS_TTL_SECONDS.
"""

from __future__ import annotations

from typing import Any

from django.db import models

HTTP, STDIO = "http", "stdio"


class McpServer(models.Model):
    """One MCP server agents may use tools of."""

    TRANSPORTS = [(HTTP, "streamable HTTP"), (STDIO, "stdio")]

    name = models.CharField(max_length=40, unique=True)
    description = models.CharField(max_length=200, blank=True)
    transport = models.CharField(max_length=8, choices=TRANSPORTS)
    url = models.URLField(max_length=2000, blank=True)
    headers = models.JSONField(default=dict, blank=True)
    command = models.CharField(max_length=100, blank=True)
    timeout_seconds = models.FloatField(default=30.0)
    tools = models.JSONField(default=list, blank=True)
    tools_listed_at = models.DateTimeField(null=True, blank=True)
    tools_error = models.TextField(blank=True)  # why the last listing failed ("" when it did not)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.CharField(max_length=200, blank=True)

    class Meta:
        app_label = "workflows"
        ordering = ["name"]

    def __str__(self) -> str:
        return f"MCP server {self.name}"

    def tool(self, name: str) -> dict[str, Any] | None:
        """The cached entry of one tool, or None."""
        return next((t for t in self.tools or () if t.get("name") == name), None)
