"""Cursor pagination: stable under inserts, cheap at any depth (a keyset, not an OFFSET).

A cursor is the sort key of the last item of a page, base64url-encoded JSON: opaque to
clients, checked on the way back in (a forged or foreign cursor is a 400, never a 500).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from typing import Any, TypeVar, cast

from django.db.models import Model, QuerySet

from workflows.api.errors import ApiError, FieldError
from workflows.api.parsing import MAX_ID

M = TypeVar("M", bound=Model)


def encode(value: int | str) -> str:
    return base64.urlsafe_b64encode(json.dumps([value]).encode()).decode().rstrip("=")


def decode(cursor: str, kind: type) -> Any:
    try:
        value = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))[0]
    except (ValueError, binascii.Error, IndexError, TypeError, KeyError):
        value = None
    valid = type(value) is kind and (kind is not int or 0 <= cast(int, value) <= MAX_ID)
    if not valid or (kind is str and "\x00" in value):
        message = "is not a cursor from this listing; start again without one"
        raise ApiError(400, f"cursor {message}.", [FieldError("query", "cursor", message)])
    return value


def paginate(
    queryset: QuerySet[M], query: Any, key: str, serialize: Callable[[M], Any], descending: bool = True
) -> dict[str, Any]:
    """Return {"items": [...], "next_cursor": ...} of one page ordered by `key` (unique)."""
    kind = int if key in ("id", "pk") else str
    if query.cursor:
        after = decode(query.cursor, kind)
        queryset = queryset.filter(**{f"{key}__lt" if descending else f"{key}__gt": after})
    rows = list(queryset.order_by(f"-{key}" if descending else key)[: query.limit + 1])
    more = len(rows) > query.limit
    rows = rows[: query.limit]
    return {
        "items": [serialize(row) for row in rows],
        "next_cursor": encode(getattr(rows[-1], key)) if more else None,
    }
