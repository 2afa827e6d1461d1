"""ASGI entry point for Daphne: HTTP through Django, websockets through Channels.

Websockets pass the same-origin check (controlplane/origins.py: scheme, host and port) and the session authentication; every
consumer then decides with controlplane.access. Static files are served by Django itself
when SWITCHYARD_SERVE_STATIC is on (the default: `make run` has no separate web server).
HTTP to /mcp goes to the MCP endpoint (workflows/mcp_endpoint/), an ASGI app of its own in
the same process; everything else to Django.
"""

from __future__ import annotations

import os
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
django_asgi = get_asgi_application()

# After Django is set up: these import models.
from channels.auth import AuthMiddleware  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.sessions import CookieMiddleware, InstanceSessionWrapper  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from controlplane.origins import SameOriginValidator  # noqa: E402
from monitoring.routing import websocket_urlpatterns  # noqa: E402
from workflows.mcp_endpoint.endpoint import (  # noqa: E402
    PATH as MCP_PATH,
    McpEndpoint,
)

django_http = ASGIStaticFilesHandler(django_asgi) if settings.SERVE_STATIC else django_asgi
mcp_endpoint = McpEndpoint()


async def http(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Send /mcp to the MCP endpoint, the rest to Django."""
    if scope["path"].rstrip("/") == MCP_PATH:
        await mcp_endpoint(scope, receive, send)
    else:
        await django_http(scope, receive, send)


class ReadSessionMiddleware:
    """Channels' SessionMiddleware for websockets, without its wrapper around every send.

    The wrapper saves a modified session on `http.response.start`, which a websocket never
    sends, yet asked the session whether it was modified and empty before every message: a
    frame per token on the LLM streams' fan-out. The consumers only read the session.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        wrapper = InstanceSessionWrapper(scope, send)
        await wrapper.resolve_session()
        return await self.inner(wrapper.scope, receive, send)


websocket_app = CookieMiddleware(ReadSessionMiddleware(AuthMiddleware(URLRouter(websocket_urlpatterns))))
application = ProtocolTypeRouter({"http": http, "websocket": SameOriginValidator(websocket_app)})
