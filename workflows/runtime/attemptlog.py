"""What a handler says during its attempt: Python logging and print, captured in the worker.

The text goes with the attempt's span into the run history (`log` in the `node.attempt`
event's data) and is shown on the run page and served by the API's node attempt resource.
It is size-limited (MAX_BYTES per attempt; the rest is dropped and a marker says how much),
so a chatty handler cannot bloat the history. Log records are taken at the level the
process logs at (LOG_LEVEL, INFO by default), from every logger, while the handler runs;
print goes to stdout, which is redirected meanwhile (workers are SimpleWorkers: one attempt
at a time in the main thread, so the redirection sees only that attempt).

A worker's slots (runtime/slots.py) run many attempts at once on their event loop's thread:
the main thread's capture takes only its own thread's records, and each slot's attempt
captures the records logged in its own task's context (`captured_in_task`), including those
of the threads it hands work to with `asyncio.to_thread` (which copies the context). Print
is not captured in slots (stdout is one per process).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from contextvars import ContextVar

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
    """Take the records of the thread that made it (the worker's main thread)."""

    def __init__(self, capture: Capture) -> None:
        super().__init__()
        self.capture = capture
        self.thread = threading.get_ident()
        self.setFormatter(FORMAT)

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:  # not a record of the slots' attempts meanwhile
            self.capture.write(self.format(record) + "\n")


TASK_CAPTURE: ContextVar[Capture | None] = ContextVar("sy_task_capture", default=None)


class TaskCaptureHandler(logging.Handler):
    """Hand each record to the capture of the slot's attempt whose context logged it."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(FORMAT)

    def emit(self, record: logging.LogRecord) -> None:
        capture = TASK_CAPTURE.get()
        if capture is not None:
            capture.write(self.format(record) + "\n")


def capture_in_tasks() -> None:
    """Install (once) the handler that `captured_in_task` relies on."""
    root = logging.getLogger()
    if not any(isinstance(h, TaskCaptureHandler) for h in root.handlers):
        root.addHandler(TaskCaptureHandler())


@contextlib.contextmanager
def captured_in_task() -> Iterator[Capture]:
    """Capture the log records of this asyncio task (a slot's attempt) while the block runs."""
    capture = Capture()
    token = TASK_CAPTURE.set(capture)
    try:
        yield capture
    finally:
        TASK_CAPTURE.reset(token)


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
