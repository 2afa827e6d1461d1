"""What a handler says during its attempt: Python logging and print, captured in the worker.

The text goes with the attempt's span into the run history (`log` in the `node.attempt`
event's data) and is shown on the run page and served by the API's node attempt resource.
It is size-limited (MAX_BYTES per attempt; the rest is dropped and a marker says how much),
so a chatty handler cannot bloat the history. Log records are taken at the level the
process logs at (LOG_LEVEL, INFO by default), from every logger, while the handler runs;
print goes to stdout, which is redirected meanwhile (workers are SimpleWorkers: one attempt
at a time in the main thread, so the redirection sees only that attempt).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

MAX_BYTES = 64 * 1024
FORMAT = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")


class Capture:
    """A bounded text buffer: keeps the first MAX_BYTES, counts what it drops."""

    def __init__(self, limit: int = MAX_BYTES) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0
        self.dropped = 0

    def write(self, text: str) -> int:
        data = text.encode(errors="replace")
        room = self.limit - self.size
        if len(data) > room:
            self.dropped += len(data) - max(room, 0)
            data = data[: max(room, 0)]
        if data:
            self.parts.append(data.decode(errors="ignore"))
            self.size += len(data)
        return len(text)

    def flush(self) -> None:
        """Nothing to flush: a file-like object for print()."""

    def text(self) -> str:
        body = "".join(self.parts)
        if self.dropped:
            body += f"\n[log truncated: {self.dropped} more bytes dropped, limit {self.limit} bytes]\n"
        return body


class CaptureHandler(logging.Handler):
    def __init__(self, capture: Capture) -> None:
        super().__init__()
        self.capture = capture
        self.setFormatter(FORMAT)

    def emit(self, record: logging.LogRecord) -> None:
        self.capture.write(self.format(record) + "\n")


@contextlib.contextmanager
def captured() -> Iterator[Capture]:
    """Capture log records and stdout while the block runs."""
    capture = Capture()
    handler = CaptureHandler(capture)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with contextlib.redirect_stdout(capture):
            yield capture
    finally:
        root.removeHandler(handler)
