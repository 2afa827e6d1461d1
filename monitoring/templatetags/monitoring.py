"""Template helpers of the dashboard: roles, durations, JSON, status names."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django import template
from django.utils import timezone

from controlplane import access

register = template.Library()


@register.filter
def role(user: Any) -> str:
    """The user's highest role, or an empty string."""
    return access.role_of(user) or ""


@register.filter
def can(user: Any, action: str) -> bool:
    """Whether the user may perform an action (a key of access.ACTIONS)."""
    return access.can(user, action)


@register.filter
def millis(value: float | None) -> str:
    """Format milliseconds readably: 840 ms, 3.2 s, 4 min 10 s."""
    if value is None or value == "":
        return "–"
    ms = float(value)
    if ms < 1000:
        return f"{ms:.0f} ms" if ms >= 10 else f"{ms:.1f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    return f"{int(ms // 60_000)} min {int(ms % 60_000 // 1000)} s"


@register.filter
def span_ms(start: datetime | None, end: datetime | None) -> str:
    if start is None:
        return "–"
    return millis(((end or timezone.now()) - start).total_seconds() * 1000)


@register.filter
def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


@register.filter
def one_line_json(value: Any) -> str:
    """JSON on one line, for table cells (a map's items)."""
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


@register.filter
def first_line(value: str) -> str:
    return (value or "").strip().splitlines()[0] if (value or "").strip() else ""


@register.filter
def human(status: str) -> str:
    return (status or "").replace("_", " ")


LONG_STRING = 60  # strings longer than this (or multi-line) are shown as text blocks


@register.filter
def readable(value: Any) -> list[dict[str, str]]:
    """Split a value into parts a person reads: long strings as text, the rest as JSON.

    An LLM's draft (a string, or a long string field of an object) shows as text with its
    line breaks; the template escapes every part, so markup in it is shown, never run.
    """
    if isinstance(value, str):
        return [{"label": "", "kind": "text", "text": value}]
    if not isinstance(value, dict):
        return [{"label": "", "kind": "json", "text": json.dumps(value, indent=2, ensure_ascii=False)}]
    texts = {k: v for k, v in value.items() if isinstance(v, str) and (len(v) > LONG_STRING or "\n" in v)}
    rest = {k: v for k, v in value.items() if k not in texts}
    parts = [{"label": k, "kind": "text", "text": v} for k, v in texts.items()]
    if rest or not parts:
        parts.insert(0, {"label": "", "kind": "json", "text": json.dumps(rest, indent=2, ensure_ascii=False)})
    return parts


@register.filter
def between(start: datetime | None, end: datetime | None) -> str:
    """The time from start to end, short: 40 s, 12 min, 3 h 5 min, 2 d 4 h."""
    if start is None or end is None:
        return "–"
    seconds = abs(int((end - start).total_seconds()))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    if seconds < 86400:
        return f"{seconds // 3600} h {seconds % 3600 // 60} min"
    return f"{seconds // 86400} d {seconds % 86400 // 3600} h"


@register.filter
def gist(value: Any, limit: int = 90) -> str:
    """A one-line gist of proposed data for a list row: `amount 12 · order_id A-1 · note …`."""
    if value is None:
        return ""
    if isinstance(value, dict):
        plain = [(k, v) for k, v in value.items() if not isinstance(v, (dict, list))]
        text = " · ".join(f"{k} {v}" for k, v in sorted(plain, key=lambda kv: len(str(kv[1]))))
    else:
        text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
