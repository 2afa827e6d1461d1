"""Switchyard as an MCP server: what it offers MCP clients, apart from how it is carried.

This package (domain) owns the tool catalogue (one tool per published workflow, named from
its slug, its input schema as the tool's schema; and the fixed tools that list runs, read a
run and decide an approval), the checks on a tool's arguments, and what a call does, through
the same domain functions the REST API uses (runs.actions, waits.approvals). The transport,
streamable HTTP at /mcp with the API keys, is a surface: workflows/mcp_endpoint/.
"""
