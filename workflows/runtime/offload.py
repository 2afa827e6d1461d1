"""Hand sync work (Django ORM, sync Redis) from a slot's coroutine to the slots' sync threads.

Django's connections are per thread and its ORM refuses to run on a thread with a running
event loop (SynchronousOnlyOperation): a slot's coroutine never touches the ORM itself. It
awaits `run_sync`, which runs the function on the executor the worker's slots installed
(`use`): a few threads (SWITCHYARD_WORKER_SLOT_CONNECTIONS), so a worker holds that many
extra PostgreSQL connections however many slots it has, and the statements of its slots
share them (each a few ms, against calls that wait for seconds). Two `run_sync` calls of one
coroutine may run on different threads: nothing may span them (a transaction, a session
lock). Standard library only: the handlers' modules import it.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import Executor
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")

_executor: Executor | None = None  # None: asyncio's default pool (a loop outside a worker)
_prepare: Callable[[], None] | None = None  # run in the thread before each function


def use(executor: Executor | None, prepare: Callable[[], None] | None = None) -> None:
    """Run every later `run_sync` on `executor` (the worker's slots' sync threads), and
    `prepare()` in the thread before each function given to `run_sync` or `to_thread` (the
    slots replace a connection a PostgreSQL restart cut there: slots.fresh_connection)."""
    global _executor, _prepare
    _executor, _prepare = executor, prepare


def prepared(func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    if _prepare is not None:
        _prepare()
    return func(*args, **kwargs)


async def run_sync(func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run `func(*args, **kwargs)` off the event loop, on a sync thread; return its result."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_executor, functools.partial(prepared, func, *args, **kwargs))


async def to_thread(func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`asyncio.to_thread` (a thread of the default pool, the context copied), prepared as
    `run_sync`: for work that may block for long, such as an agent's tool call."""
    return await asyncio.to_thread(prepared, func, *args, **kwargs)


# Redis writes a slot's coroutine makes (streamed text), each a function that adds its
# commands to a pipeline: the slots send them together every few ms from the sync thread.
# 500 streams coalesced at 0.1 s each are 5,000 XADD round trips a second, more than one
# event loop can wait for; batched they are ~50 pipelines a second. Unset outside a slot.
OUTBOX: ContextVar[list[Callable[[Any], None]] | None] = ContextVar("sy_outbox", default=None)
