"""Redaction: every secret value revealed in this process is replaced by `[secret:NAME]`.

`secrets.reveal` remembers each value it returns. The worker runs every attempt's output,
error, traceback and captured log through `redact` before they are stored
(`runtime/execution.py`, `runtime/slots.py`), and `RedactingFilter` (on the log handlers,
settings.LOGGING) does the same for log lines; so a value a server echoes back, or an
exception that quotes a URL, never reaches PostgreSQL, a page, the API, a trace or a log.
Pure (standard library only): the logging configuration loads it before Django's apps.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

_lock = threading.Lock()
_revealed: dict[str, str] = {}  # value -> name, of every value revealed in this process


def remember(name: str, value: str) -> None:
    if value:
        with _lock:
            _revealed[value] = name


def forms_of(value: str) -> list[str]:
    """The value as it is, and as it reads inside a JSON string (quotes and non-ASCII escaped)."""
    escaped = json.dumps(value)[1:-1]
    return [value] if escaped == value else [value, escaped]


def redact(text: str) -> str:
    """Replace every value revealed in this process by `[secret:NAME]`."""
    if not _revealed or not text:
        return text
    with _lock:
        known = sorted(_revealed.items(), key=lambda kv: -len(kv[0]))  # longest first: no partial leftovers
    for value, name in known:
        for form in forms_of(value):
            if form in text:
                text = text.replace(form, f"[secret:{name}]")
    return text


def redact_value(value: Any) -> Any:
    """`redact` every string of a JSON value (keys included), keeping its shape."""
    if not _revealed:
        return value
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redact_value(item) for item in value]
    if isinstance(value, dict):
        return {redact(str(key)): redact_value(item) for key, item in value.items()}
    return value


class RedactingFilter(logging.Filter):
    """Redact revealed values from every log record (settings.LOGGING puts it on the handlers)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _revealed:
            message = record.getMessage()
            cleaned = redact(message)
            if cleaned != message:
                record.msg, record.args = cleaned, None
            if record.exc_info and record.exc_text is None and record.exc_info[0] is not None:
                record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        return True
