"""Accept a websocket only from the page's own origin, as Django's CSRF check does for forms.

Channels' AllowedHostsOriginValidator compares the Origin's host name with ALLOWED_HOSTS and
ignores the port, so a page served from another port of the same host (another app on
127.0.0.1:9000) could open the dashboard's websocket with the visitor's session cookie, where
a form it posted would be refused. Here the Origin must equal `<scheme>://<Host header>`
(scheme, host and port), the Host being one of ALLOWED_HOSTS; or be one of
CSRF_TRUSTED_ORIGINS, the same exception Django's CSRF check makes (a TLS-terminating proxy).
"""

from __future__ import annotations

from typing import Any

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host


class SameOriginValidator:
    """ASGI middleware: deny a websocket whose Origin is not this server's own origin."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket" and not is_same_origin(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)


def is_same_origin(scope: dict[str, Any]) -> bool:
    headers: dict[bytes, bytes] = dict(scope.get("headers") or [])
    origin = headers.get(b"origin", b"").decode("latin-1").lower()
    host = headers.get(b"host", b"").decode("latin-1").lower()
    if not origin:
        return False  # browsers always send Origin on a websocket; a page never omits it
    if origin in (o.lower() for o in settings.CSRF_TRUSTED_ORIGINS):
        return True
    domain, _ = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return False
    scheme = "https" if scope.get("scheme") in ("wss", "https") else "http"
    return origin == f"{scheme}://{host}"
