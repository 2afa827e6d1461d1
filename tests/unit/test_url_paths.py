"""No two page routes share a path: Django answers the first that matches, so a second one is
never reached (the overview's busiest-keys card once took `/keys/` from the API keys page)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from django.urls import URLPattern, URLResolver, get_resolver


def routes(patterns: list[Any], prefix: str = "") -> list[str]:
    found = []
    for p in patterns:
        if isinstance(p, URLResolver):
            found += routes(p.url_patterns, prefix + str(p.pattern))
        elif isinstance(p, URLPattern):
            found.append(prefix + str(p.pattern))
    return found


def test_no_two_routes_share_a_path() -> None:
    # The API (django-ninja dispatches one path's methods itself) and Django's admin aside.
    pages = [r for r in routes(get_resolver().url_patterns) if not r.startswith(("api/", "admin/"))]
    counts = Counter(pages)
    shared = sorted(path for path, n in counts.items() if n > 1)
    assert not shared, f"routes defined twice (the second is never reached): {shared}"
