"""The server-error page: 503 when a service Switchyard needs is away, 500 otherwise.

Django calls `server_error` (controlplane.urls.handler500) while the exception is being
handled, so `sys.exc_info()` still names it; a database or Redis that does not answer is
the operator's cue to wait or restart, not a bug, and gets its own page and status.
"""

from __future__ import annotations

import sys

import redis
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.template import loader

UNAVAILABLE = (OperationalError, InterfaceError, redis.ConnectionError, redis.TimeoutError)


def server_error(request: HttpRequest) -> HttpResponse:
    """Render 503.html for an unreachable service, 500.html for anything else (no context)."""
    unavailable = isinstance(sys.exc_info()[1], UNAVAILABLE)
    name, status = ("503.html", 503) if unavailable else ("500.html", 500)
    response = HttpResponse(loader.get_template(name).render(), status=status)
    if unavailable:
        response["Retry-After"] = "5"
    return response
