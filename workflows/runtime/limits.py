"""Time limits in the worker: SIGALRM raises an exception in the frame that runs too long.

A limit may be nested in another (an agent's tool call inside its node's attempt): the
inner one is armed only if it ends first, and the outer one is re-armed, for what is left
of it, when the inner one ends; an outer deadline already passed fires at once.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

OUTER_PASSED_SECONDS = 1e-6  # setitimer(0) would disarm: fire an outer limit "at once" instead


class NodeTimeout(BaseException):
    """Raised in the handler's frame when its attempt runs out of time.

    A BaseException, so that a handler's own `except Exception` cannot swallow it.
    """


class ToolTimeout(BaseException):
    """Raised in a tool's frame when one call of it runs out of time (runtime/agent.py)."""


@contextmanager
def time_limit(seconds: float, error: type[BaseException] = NodeTimeout) -> Iterator[None]:
    """Raise `error` in this frame after `seconds` (main thread only, as RQ's own)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    outer_left = signal.getitimer(signal.ITIMER_REAL)[0]
    if outer_left and outer_left <= seconds:  # the outer limit ends first: it alone applies
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise error()

    began = time.monotonic()
    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_left:
            left = outer_left - (time.monotonic() - began)
            signal.setitimer(signal.ITIMER_REAL, max(left, OUTER_PASSED_SECONDS))
