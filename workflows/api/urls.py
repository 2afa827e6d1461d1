"""URLconf of /api/v1/: ninja's, with what every answer of an operation carries added in one place.

`finished` is the one adapter around ninja's views. ninja answers a known path with an
unknown method by a bare 405, before any of the API's exception handlers run: the adapter
turns it into a problem that keeps ninja's `Allow` header. And it puts the rate-limit headers
of the request's key or session (auth.py) on every answer of a request that counted against
the window: successes, problems raised anywhere, and answers a view builds itself (the event
stream), which ninja's temporal response never reaches. Which answers those are, and why, is
`schema.answer_headers`'s docstring. Anything else under /api/v1/ is a 404 problem rather
than Django's HTML page.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.urls import URLPattern, path, re_path
from django.views.decorators.csrf import csrf_exempt

from workflows.api.api import api
from workflows.api.errors import problem


def finished(view: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(view):  # an async operation (the SSE stream) stays async
        return async_finished(view)

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return finish(request, view(request, *args, **kwargs))

    return wrapped


def async_finished(view: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(view)
    async def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return finish(request, await view(request, *args, **kwargs))

    return wrapped


def finish(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    """Make a bare 405 a problem; add the request's rate-limit headers where none are set."""
    if isinstance(response, HttpResponseNotAllowed):
        allow = response["Allow"]
        detail = f"{request.method} is not allowed here; use {allow}."
        return problem(request, 405, detail, headers={"Allow": allow})
    rate = getattr(request, "rate", None)  # set by auth.py once the request was counted
    for name, value in (rate.headers() if rate else {}).items():
        if name not in response:  # a 429 already says the state that refused it
            response[name] = value
    return response


@csrf_exempt
def not_found(request: HttpRequest) -> HttpResponse:
    return problem(request, 404, f"No API endpoint at {request.path}; see /api/v1/docs.")


def ninja_urls() -> tuple[list[Any], str, str]:
    # Not module-level names: include() would take a module's `app_name` for this URLconf's own.
    patterns, app, namespace = api.urls
    for pattern in patterns:
        if isinstance(pattern, URLPattern):
            pattern.callback = finished(pattern.callback)
    return patterns, app, namespace


urlpatterns = [path("", ninja_urls()), re_path(r"^", not_found)]
