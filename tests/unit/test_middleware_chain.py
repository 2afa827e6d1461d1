"""Under ASGI the middleware chain runs in one thread: one hop in, one to the view.

Django's built-in middleware (MiddlewareMixin) in async mode sends each process_request and
process_response to a thread of its own; a sync-only middleware innermost keeps them all
synchronous (settings.MIDDLEWARE). These tests hold that, and the order CSRF needs.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import AsyncToSync, SyncToAsync, iscoroutinefunction
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler


def adapters(handler: Any) -> list[str]:
    """The sync/async adapters and the middleware running async, walking the chain outside in."""
    met = []
    for _ in range(100):
        if isinstance(handler, SyncToAsync):
            met.append("SyncToAsync")
            handler = handler.func
        elif isinstance(handler, AsyncToSync):
            met.append("AsyncToSync")
            handler = handler.awaitable
        elif hasattr(handler, "get_response"):
            if iscoroutinefunction(handler):  # each of its hooks hops to a thread
                met.append(f"async {type(getattr(handler, '__wrapped__', handler)).__name__}")
            handler = handler.get_response
        elif hasattr(handler, "__wrapped__"):
            handler = handler.__wrapped__
        else:
            return met
    raise AssertionError("the middleware chain did not end")


def test_the_asgi_chain_enters_one_thread_and_leaves_it_only_for_the_view() -> None:
    # Outside in: into the request's thread for every middleware, then back to the event loop
    # for Django's async get_response, which sends the (sync) view to that same thread.
    assert adapters(ASGIHandler()._middleware_chain) == ["SyncToAsync", "AsyncToSync"]


def test_the_text_guard_is_last_and_after_csrf() -> None:
    assert settings.MIDDLEWARE[-1] == "controlplane.textguard.RefuseUnstorableText"
    assert (
        settings.MIDDLEWARE.index("django.middleware.csrf.CsrfViewMiddleware") < len(settings.MIDDLEWARE) - 1
    )
