"""The MCP endpoint (/mcp): streamable HTTP, served by Daphne beside Django (a surface).

`endpoint.py` is the ASGI app that controlplane/asgi.py routes /mcp to: it checks the API
key, the host and the rate limit, then hands the request to the official MCP SDK's
streamable-HTTP session manager; `tools.py` is the SDK server's handlers, thin, over
workflows/mcp_server (the domain).
"""
