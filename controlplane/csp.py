"""Content-Security-Policy on every response, with a fresh nonce per request.

Django 5.2 has no CSP of its own (6.0 adds one); this is the few lines needed rather than a
dependency. Pages load scripts and styles only from this origin: the editor's and the
dashboard's bundles, htmx and Swagger UI are all static files. An inline `<script>` or
`<style>` needs `nonce="{{ request.csp_nonce }}"` (the API docs page's stylesheet has one).

Two allowances, each for a reason:
- `style-src-attr 'unsafe-inline'`: `style="..."` attributes (an agent step's bar is placed
  by a computed margin and width, and htmx swaps such markup in). An attribute cannot run
  script; `<style>` elements still need the nonce.
- `img-src data:`: the stylesheets' small SVG icons are data: URLs.

htmx is told not to add its indicator `<style>` element (base.html's htmx-config), and never
evaluates code here: no `hx-on` and no `js:` values in the templates.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

from django.http import HttpRequest, HttpResponseBase

HEADER = "Content-Security-Policy"


def policy(nonce: str) -> str:
    """Return the policy for a response whose inline elements carry `nonce`."""
    return "; ".join(
        [
            "default-src 'self'",
            f"script-src 'self' 'nonce-{nonce}'",
            f"style-src 'self' 'nonce-{nonce}'",
            "style-src-attr 'unsafe-inline'",
            "img-src 'self' data:",
            "font-src 'self'",
            "connect-src 'self'",  # 'self' covers ws:// and wss:// to this host (CSP 3)
            "worker-src 'self'",  # the editor's layout worker
            "object-src 'none'",
            "base-uri 'self'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ]
    )


class ContentSecurityPolicy:
    """Middleware: give the request a nonce and its response the policy (unless a view set one)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        nonce = secrets.token_urlsafe(16)
        request.csp_nonce = nonce  # type: ignore[attr-defined]  # read by templates as request.csp_nonce
        response = self.get_response(request)
        if HEADER not in response:
            response[HEADER] = policy(nonce)
        return response
