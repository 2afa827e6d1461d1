"""Structured logs: one JSON object a line (SWITCHYARD_LOG_FORMAT=json).

Each line has the time, level, logger and message, the exception if any, and every id the
record carries: pass them as `extra={"run_id": ..., "node_id": ...}`, or bind them for a
block of code with `log_context(run_id=..., node_id=...)` (a context variable, so threads
and asyncio tasks keep their own).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

CONTEXT_FIELDS = ("run_id", "node_id", "attempt", "workflow", "worker", "letter_id")
_context: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "switchyard_log_context", default=None
)


@contextlib.contextmanager
def log_context(**fields: Any) -> Iterator[None]:
    """Attach these ids to every record logged inside the block."""
    token = _context.set({**(_context.get() or {}), **fields})
    try:
        yield
    finally:
        _context.reset(token)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(_context.get() or {})
        for name in CONTEXT_FIELDS:
            if hasattr(record, name):
                entry[name] = getattr(record, name)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)
