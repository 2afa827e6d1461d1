"""Refuse, before any view runs, page requests carrying text PostgreSQL cannot store.

A NUL character (or an unpaired surrogate) in a reason, a comment, a filter or a path
segment reached PostgreSQL from the pages and answered 500 (`DataError`). One middleware
covers every page and form, those written later included; it uses the API's own check
(workflows/store/texts.py). The API is left to its parser (api/parsing.py), which answers the
same refusal as problem+json. The answer is 400 naming the field, and nothing is stored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from workflows.store.texts import is_text

API_PREFIX = "/api/"
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


class RefuseUnstorableText:
    # Sync only, and last in MIDDLEWARE: it keeps the whole chain synchronous under ASGI
    # (settings.MIDDLEWARE says why; test_middleware_chain holds it).
    sync_capable = True
    async_capable = False

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view: Any, args: Any, kwargs: Any) -> HttpResponse | None:
        """Run after the CSRF check (listed after it): a forged request gets its 403 first."""
        if request.path_info.startswith(API_PREFIX):
            return None
        field = first_bad_field(request)
        return None if field is None else refusal(request, field)


def first_bad_field(request: HttpRequest) -> str | None:
    if not is_text(request.path_info):
        return "path"
    sources = [request.GET]
    if request.method == "POST" and request.content_type in FORM_TYPES:
        sources.append(request.POST)
    for source in sources:
        for name, values in source.lists():
            if not all(map(is_text, [name, *values])):
                return name if is_text(name) else "(a field name)"
    return None


def refusal(request: HttpRequest, field: str) -> HttpResponse:
    message = f"{field} contains a NUL character or an unpaired surrogate; remove it and send again."
    if "json" in request.headers.get("Accept", "") or "json" in (request.content_type or ""):
        issue = {"code": "invalid", "message": message, "node": None, "field": field}
        return JsonResponse({"error": message, "issues": [issue]}, status=400)
    return HttpResponse(message, status=400, content_type="text/plain; charset=utf-8")
