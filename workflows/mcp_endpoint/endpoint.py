"""The ASGI app at /mcp: the API key, the host, the rate limit, then the MCP SDK.

Why the official SDK (mcp 2.3.0) and not a JSON-RPC view of our own: its
StreamableHTTPSessionManager is a plain ASGI app, so it mounts beside Django in the same
Daphne process (controlplane/asgi.py routes /mcp here), and it keeps up with the protocol
(version negotiation, JSON or SSE answers, progress, batching rules) so we do not have to.
It runs **stateless**: each POST is served by a fresh transport that needs nothing from an
earlier request, so any of several Daphne processes (or hosts) behind one address serves any
request, and a restarted process loses nothing. The price: no `Mcp-Session-Id`, no GET stream
of server-sent notifications, hence no `notifications/tools/list_changed`; clients list the
tools again to see a workflow published since (docs/integrators/mcp.md). Progress
notifications still reach the client, on the SSE answer of the call they belong to.

Daphne does not run ASGI lifespan events, so the session manager's task group is started on
the first request, in the process's event loop, and lives as long as the process. Being stateless, the
endpoint answers only POST: a GET (a stream of server-sent notifications) or a DELETE (the end
of a session) is a 405, as the transport's specification asks of a server without them.

Checked here, before the SDK sees the body, as the REST API checks them (workflows/api/auth.py,
whose functions these are): the host against ALLOWED_HOSTS (400), the key (401 with a Bearer
challenge), the key's one-minute rate window shared with the REST API (429 with Retry-After);
the body is limited to DATA_UPLOAD_MAX_MEMORY_SIZE by the SDK (413); PostgreSQL away while
the key is checked is a 503 with Retry-After, as on the API. What each tool needs
(the scopes) is checked per call, in tools.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.types import Receive, Scope, Send

from workflows.api.auth import admit_token, token_of
from workflows.api.errors import ApiError
from workflows.integrations import keycache
from workflows.mcp_endpoint.tools import build_server
from workflows.mcp_server.connection import PATH
from workflows.runtime import outages
from workflows.store.errors import STORES_AWAY

__all__ = ["PATH", "McpEndpoint"]

log = logging.getLogger(__name__)
UNAUTHORIZED = -32001  # JSON-RPC server error codes (-32000..-32099) for refusals before the SDK


class McpEndpoint:
    """The /mcp ASGI app (see the module docstring)."""

    def __init__(self) -> None:
        self.manager = StreamableHTTPSessionManager(
            build_server(), stateless=True, max_request_body_size=settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        )
        self.started: asyncio.Future[None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":  # stateless: no GET stream to open, no session to DELETE
            await refuse(
                send, 405, "This MCP endpoint is stateless: POST JSON-RPC messages.", {"Allow": "POST"}
            )
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        if not validate_host(split_domain_port(host)[0], allowed_hosts()):
            await refuse(send, 400, f"The host {host!r} is not served here (ALLOWED_HOSTS).")
            return
        try:
            admitted = await database_sync_to_async(admit)(headers.get("authorization", ""))
        except ApiError as exc:
            await refuse(send, exc.status, exc.detail, exc.headers)
            return
        except STORES_AWAY as exc:  # as the API answers (api.py on_store_away): 503, Retry-After
            log.warning("POST %s: %s", PATH, exc)
            retry = {"Retry-After": str(outages.RETRY_AFTER_SECONDS)}
            await refuse(send, 503, outages.unavailable(exc), retry)
            return
        origin = f"{scope.get('scheme', 'http')}://{host}"
        await self.start()
        await self.manager.handle_request(
            {**scope, "switchyard.admitted": admitted, "switchyard.origin": origin}, receive, send
        )

    async def start(self) -> None:
        """Start the session manager's task group once, in this process's loop (no lifespan)."""
        if self.started is None:
            self.started = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().create_task(self.serve(self.started))
        await asyncio.shield(self.started)

    async def serve(self, started: asyncio.Future[None]) -> None:
        try:
            async with self.manager.run():
                started.set_result(None)
                await asyncio.Event().wait()  # for the life of the process
        except Exception as exc:  # the requests waiting on the start fail with it, not hang
            if not started.done():
                started.set_exception(exc)
            raise


def allowed_hosts() -> list[str]:
    """ALLOWED_HOSTS as Django's HttpRequest.get_host reads it (empty under DEBUG: local names)."""
    if not settings.ALLOWED_HOSTS and settings.DEBUG:
        return [".localhost", "127.0.0.1", "[::1]"]
    return list(settings.ALLOWED_HOSTS)


def admit(authorization: str) -> keycache.Admitted:
    """Return the key the header presents, with its owner's role, counted against its rate
    window as the API counts it (auth.admit_token); ApiError if none."""
    admitted, _ = admit_token(token_of(authorization))
    return admitted


async def refuse(send: Send, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
    """Answer a JSON-RPC error (no id: the request was not read) with the HTTP status."""
    code = UNAUTHORIZED if status == 401 else -32000
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": detail}}).encode()
    extra = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    start: dict[str, Any] = {
        "type": "http.response.start",
        "status": status,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *extra,
        ],
    }
    await send(start)
    await send({"type": "http.response.body", "body": body})
