"""URLconf of /api/v1/: ninja's, with two answers ninja gives in its own format made problems.

ninja answers a known path with an unknown method by a bare 405, before any of the API's
exception handlers run; `with_problem_405` (the one adapter around ninja's views) turns it
into a problem that keeps ninja's `Allow` header. Anything else under /api/v1/ is a 404
problem rather than Django's HTML page.
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


def with_problem_405(view: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(view):  # an async operation (the SSE stream) stays async
        return async_with_problem_405(view)

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return as_problem_405(request, view(request, *args, **kwargs))

    return wrapped


def async_with_problem_405(view: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(view)
    async def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return as_problem_405(request, await view(request, *args, **kwargs))

    return wrapped


def as_problem_405(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    if isinstance(response, HttpResponseNotAllowed):
        allow = response["Allow"]
        detail = f"{request.method} is not allowed here; use {allow}."
        return problem(request, 405, detail, headers={"Allow": allow})
    return response


@csrf_exempt
def not_found(request: HttpRequest) -> HttpResponse:
    return problem(request, 404, f"No API endpoint at {request.path}; see /api/v1/docs.")


def ninja_urls() -> tuple[list[Any], str, str]:
    # Not module-level names: include() would take a module's `app_name` for this URLconf's own.
    patterns, app, namespace = api.urls
    for pattern in patterns:
        if isinstance(pattern, URLPattern):
            pattern.callback = with_problem_405(pattern.callback)
    return patterns, app, namespace


urlpatterns = [path("", ninja_urls()), re_path(r"^", not_found)]
