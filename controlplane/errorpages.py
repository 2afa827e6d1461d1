"""The server-error page: 503 when a store Switchyard needs is away, 500 otherwise.

Django calls `server_error` (controlplane.urls.handler500) while the exception is being
handled, so `sys.exc_info()` still names it; a database or Redis that does not answer is
the operator's cue to wait or restart, not a bug, and gets its own page, status and
Retry-After. The API answers the same as problem+json (workflows/api/api.py,
`on_store_away`); both take the decision, the message and the wait from workflows/runtime/outages.py.
"""

from __future__ import annotations

import sys

from django.db import close_old_connections
from django.http import HttpRequest, HttpResponse
from django.template import loader

from workflows.runtime import outages


def server_error(request: HttpRequest) -> HttpResponse:
    """Render 503.html for a store that is away, 500.html for anything else (no request context:
    the context processors would read the session, in PostgreSQL)."""
    exc = sys.exc_info()[1]
    if exc is None or not isinstance(exc, outages.STORES_AWAY):
        return HttpResponse(loader.get_template("500.html").render(), status=500)
    close_old_connections()  # a broken connection is replaced at the next request
    context = {
        "store": outages.store_of(exc),
        "message": outages.unavailable(exc),
        "retry": outages.RETRY_AFTER_SECONDS,
    }
    response = HttpResponse(loader.get_template("503.html").render(context), status=503)
    response["Retry-After"] = str(outages.RETRY_AFTER_SECONDS)
    return response
