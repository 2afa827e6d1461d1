"""Template helpers of the dashboard: roles, durations, JSON, status names."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from django import template
from django.http import QueryDict
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from controlplane import access

register = template.Library()


def page_role(user: Any) -> str | None:
    """The user's role, read once per user object: a page asks a dozen times (one query each).

    Pages render with the request's user, an object of that request alone; fragments pushed
    over websockets (whose user lives as long as the socket) do not ask, so a demotion is
    never hidden behind this memo.
    """
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    if "_page_role" not in user.__dict__:
        user.__dict__["_page_role"] = access.role_of(user)
    role: str | None = user.__dict__["_page_role"]
    return role


@register.filter
def role(user: Any) -> str:
    """The user's highest role, or an empty string."""
    return page_role(user) or ""


@register.filter
def can(user: Any, action: str) -> bool:
    """Whether the user may perform an action (a key of access.ACTIONS)."""
    return access.role_can(page_role(user), action)


@register.filter
def millis(value: float | str | None) -> str:
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
def epoch(value: datetime | None) -> str:
    """A moment as epoch seconds, for `data-live-since` (static/monitoring/src/durations.js):
    the page makes the duration since then grow."""
    return "" if value is None else f"{value.timestamp():.3f}"


@register.filter
def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


@register.filter
def compact_json(value: Any) -> str:
    """JSON on one line (audit details, schema fragments): never Python's repr of a dict."""
    return json.dumps(value, ensure_ascii=False, default=str, separators=(", ", ": "))


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


@register.filter
def lookup(mapping: Any, key: Any) -> Any:
    """`mapping[key]`, or None: a dict of the view's keyed by the row's id."""
    return mapping.get(key) if hasattr(mapping, "get") else None


@register.filter
def query_fields(query: str) -> list[tuple[str, str]]:
    """The (name, value) pairs of a query string: a filter as a form's hidden fields."""
    return cast(list[tuple[str, str]], list(QueryDict(query).items()))  # items() gives each last value


ABSOLUTE = "%Y-%m-%d %H:%M:%S UTC"


def relative(moment: datetime, now: datetime) -> str:
    """Say how long ago (or how far ahead) `moment` is: just now, 3 min ago, in 2 h, 4 d ago."""
    seconds = int((now - moment).total_seconds())
    size = abs(seconds)
    if size < 10:
        return "just now"
    for unit, span in (("d", 86400), ("h", 3600), ("min", 60), ("s", 1)):
        if size >= span:
            amount = f"{size // span} {unit}"
            return f"{amount} ago" if seconds > 0 else f"in {amount}"
    return "just now"


@register.filter
def when(value: datetime | None) -> str:
    """One date format everywhere: relative text, the absolute time in the title.

    The title is UTC as rendered; static/shared/time.js (on every page) rewrites it in the
    reader's own time zone, with milliseconds, and keeps the relative text fresh from the
    `datetime` attribute. A page that needs its own text keeps it with `data-keep-text`.
    """
    if isinstance(value, str):
        value = parse_datetime(value)
    if not value:
        return mark_safe('<span class="muted">–</span>')
    moment = value.astimezone(UTC)
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        moment.isoformat(),
        moment.strftime(ABSOLUTE),
        relative(moment, timezone.now()),
    )


@register.filter
def seconds(value: float | None) -> str:
    """A length of time given in seconds, short: 40 s, 12 min, 3 h 5 min, 2 d 4 h."""
    if value is None:
        return "–"
    start = datetime.fromtimestamp(0, UTC)
    return between(start, start + timedelta(seconds=float(value)))


@register.filter
def version_label(version: Any) -> str:
    """A version's number as shown everywhere: "v7", or "v7 test" for the frozen copy of a
    draft made for a test run (WorkflowVersion.is_test_version), which is no release."""
    if version is None:
        return "–"
    if not getattr(version, "is_test_version", False):
        return f"v{version.number}"
    return format_html(
        'v{} <span class="badge warn" data-test-version title="{}">test</span>',
        version.number,
        "A test version: the frozen copy of a draft made for a test run, published but never made active by it.",
    )
