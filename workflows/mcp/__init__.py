"""MCP servers as agent tools (Switchyard as an MCP client): a domain package.

It owns the servers admins register (servers.py: streamable HTTP with headers from the
secrets store, or stdio commands from the settings' allow-list), their tools as last listed,
checked and cached in PostgreSQL (catalog.py), the save-time check of an agent's `mcp_tools`
(usage.py), one tool call between the agent loop and a server (calls.py) and the SDK code
that talks to a server (client.py). The agent loop (workflows/agents/loop.py) records each
call as a durable tool step. Imports the store and the core; never the agents.
"""
