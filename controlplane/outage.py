"""Answer a styled 503 page, with Retry-After, when a page finds a store away.

The API answers the same as problem+json (workflows/api/api.py, `on_store_away`); both use
the message and the wait of workflows/outages.py. Readiness (/api/v1/health/ready) names
the store that is down.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import close_old_connections
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string

from workflows import outages

log = logging.getLogger(__name__)


class StoresAwayPage:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if not isinstance(exc, outages.STORES_AWAY):
            return None
        log.warning("%s %s: %s", request.method, request.path, exc)
        close_old_connections()  # a broken connection is replaced at the next request
        # No request context: the context processors would read the session, in PostgreSQL.
        body = render_to_string(
            "503.html",
            {
                "store": outages.store_of(exc),
                "message": outages.unavailable(exc),
                "retry": outages.RETRY_AFTER_SECONDS,
            },
        )
        response = HttpResponse(body, status=503)
        response["Retry-After"] = str(outages.RETRY_AFTER_SECONDS)
        return response
