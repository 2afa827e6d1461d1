"""How the dashboard's views ask controlplane.access: login first, then the action's role."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

from controlplane import access

View = Callable[..., HttpResponse]


def requires(action: str) -> Callable[[View], View]:
    """Send anonymous users to the login page; refuse (403) users whose role cannot `action`."""

    def decorate(view: View) -> View:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not access.can(request.user, action):
                raise PermissionDenied(f"Your role may not {action.replace('_', ' ')}.")
            return view(request, *args, **kwargs)

        return wrapper

    return decorate
