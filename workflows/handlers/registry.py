"""Register node handlers by name: the only code a workflow definition can name.

Pure: standard library only, so the graph validator, the scheduler and every worker share
it without Django settings. A handler module registers its functions when it is imported;
`SWITCHYARD["HANDLER_MODULES"]` lists the modules and `load_handler_modules` imports them.

Names are short dotted identifiers (`core.echo`, `demo.fetch_profile`); nothing typed in a
browser ever resolves to anything but an entry of this registry.
"""

from __future__ import annotations

import asyncio
import difflib
import importlib
import inspect
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

NAME_PATTERN = r"^[a-z][a-z0-9_.]{0,99}$"
_NAME_RE = re.compile(NAME_PATTERN)

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")
A = TypeVar("A", bound=Callable[..., Awaitable[Any]])


class HandlerError(Exception):
    """Fail an attempt with a clear message, a sentence a person can act on.

    `retryable=False` says that no retry can fix it (the run's input lacks a field, a config
    is off its schema, a server refused the request as malformed or unauthorised): the
    attempt fails for good, whatever the node's retry budget, and the node is dead after it
    (engine.resolve_failure). The worker keeps its traceback, bounded, like any exception's.
    """

    def __init__(self, message: str = "", *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


def is_retryable(exc: BaseException) -> bool:
    """Whether a retry could fix what raised `exc`: anything but a HandlerError that says not."""
    return getattr(exc, "retryable", True) is not False


class UnknownHandlerError(KeyError):
    """Raised by `get_handler` for a name that is not registered."""

    def __str__(self) -> str:
        # KeyError's own __str__ shows the repr of its argument, quotes and all.
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class NodeContext:
    """Carry everything one attempt of one node may read.

    `idempotency_key` is `run_id:node_id:attempt`; handlers pass it on to the systems they
    change so that at-least-once execution has effectively-once effects. `deadline` is a
    `time.monotonic()` value after which the worker ends the attempt.
    """

    run_id: int
    node_id: str
    attempt: int
    idempotency_key: str
    input: dict[str, Any]
    upstream: dict[str, Any]
    config: dict[str, Any]
    deadline: float
    node_run_id: int = 0  # the NodeRun row; 0 in a context made outside the worker
    workflow_id: int = 0  # the run's workflow, as the worker knows it; 0: read it when needed
    item: Any = None  # a map node's item (core/maps.py); None for other nodes
    index: int | None = None  # the item's place in the map's list
    # A map item's: its map node's (NodeRun id, attempt), under which its calls pass the LLM
    # gates and are recorded (`recorded_as`); node_run_id stays 0 (no attempt row of its own).
    map_attempt: tuple[int, int] | None = None

    def recorded_as(self, step: str = "") -> tuple[int, int, str] | None:
        """(NodeRun id, attempt, step) the calls of this context are admitted, recorded and
        replayed under: its attempt's; a map item's, its map node's attempt, with `item N`
        first in the step; None for a context made outside the worker."""
        if self.node_run_id:
            return self.node_run_id, self.attempt, step
        if self.map_attempt is not None:
            return *self.map_attempt, f"item {self.index} {step}".strip()
        return None

    def remaining(self) -> float:
        """Return the seconds left before the deadline, never below zero."""
        return max(0.0, self.deadline - time.monotonic())


@dataclass(frozen=True)
class Tool:
    """How an agent (`llm.agent`) calls a handler as a tool: the config schema is the
    arguments' schema, and each call gets `timeout_seconds` and up to `max_attempts` tries
    (timeouts and unexpected errors only: a HandlerError goes back to the model at once)."""

    timeout_seconds: float = 30.0
    max_attempts: int = 2


@dataclass(frozen=True)
class Handler:
    """Describe a registered handler: its function, documentation and config schema.

    `batchable` marks short, CPU-only handlers that the scheduler may pack several to a job;
    anything that waits on the network or the clock must leave it False. `tool` makes the
    handler callable by agents, its config schema being the arguments' schema. `schema_from`
    derives the config schema from the other handlers (the agent's list of tools), again
    whenever one registers. `on_loop` is the handler's coroutine (`on_loop` decorator): a
    handler that has one is I/O-bound, and a worker runs its attempts in slots, many at once
    on its event loop (runtime/slots.py); `func` stays its path everywhere else.
    """

    name: str
    func: Callable[[NodeContext], Any]
    doc: str
    config_schema: dict[str, Any] | None
    batchable: bool = False
    tool: Tool | None = None
    schema_from: Callable[[Mapping[str, Handler]], dict[str, Any]] | None = None
    on_loop: Callable[[NodeContext], Awaitable[Any]] | None = None

    @property
    def io_bound(self) -> bool:
        """Whether a worker runs this handler's attempts in slots (it waits on I/O)."""
        return self.on_loop is not None

    def summary(self) -> str:
        """Return the first line of the docstring."""
        return self.doc.strip().splitlines()[0].strip() if self.doc.strip() else ""

    @property
    def origin(self) -> str:
        """Return `module.qualname` of the function, for messages about this handler."""
        return _origin(self.func)


class Registry:
    """Hold handlers by name; the module-level functions use one shared instance."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}

    def node(
        self,
        name: str,
        *,
        config_schema: dict[str, Any] | None = None,
        batchable: bool = False,
        tool: Tool | bool = False,
        schema_from: Callable[[Mapping[str, Handler]], dict[str, Any]] | None = None,
    ) -> Callable[[F], F]:
        """Return a decorator that registers a function under `name`."""
        check_name(name)
        check_schema(name, config_schema)
        if tool and config_schema is None:
            raise TypeError(f"Handler {name!r}: a tool needs a config_schema (the schema of its arguments).")
        as_tool = Tool() if tool is True else tool or None

        def register(func: F) -> F:
            doc = inspect.getdoc(func)
            if not doc:
                raise ValueError(
                    f"Handler {name!r} ({_origin(func)}) needs a docstring: the editor shows it."
                )
            self.add(Handler(name, func, doc, config_schema, batchable, as_tool, schema_from))
            return func

        return register

    def add(self, handler: Handler) -> None:
        """Register a handler; refuse a name already taken by a different function."""
        existing = self._handlers.get(handler.name)
        # The same function registering again is a module imported twice (reload), not a clash.
        if existing is not None and existing.origin != handler.origin:
            raise ValueError(
                f"Handler name {handler.name!r} is registered twice: by {existing.origin} "
                f"and by {handler.origin}. Rename one of them."
            )
        self._handlers[handler.name] = handler
        self._derive_schemas()

    def add_coroutine(self, name: str, coroutine: Callable[[NodeContext], Awaitable[Any]]) -> None:
        """Give the registered handler `name` its coroutine: it is I/O-bound from now on."""
        handler = self.get(name)
        if handler.batchable:
            raise ValueError(f"Handler {name!r} is batchable (CPU only): it cannot wait on I/O in a slot.")
        self._handlers[name] = replace(handler, on_loop=coroutine)

    def _derive_schemas(self) -> None:
        for name, handler in self._handlers.items():
            if handler.schema_from is not None:
                self._handlers[name] = replace(handler, config_schema=handler.schema_from(self._handlers))

    def tools(self) -> dict[str, Handler]:
        """Return the handlers an agent may call, by name, sorted."""
        return {name: h for name, h in self.all().items() if h.tool is not None}

    def get(self, name: str) -> Handler:
        """Return the handler registered under `name`; raise UnknownHandlerError otherwise."""
        try:
            return self._handlers[name]
        except KeyError:
            raise UnknownHandlerError(self._unknown_message(name)) from None

    def all(self) -> dict[str, Handler]:
        """Return name -> handler, sorted by name."""
        return dict(sorted(self._handlers.items()))

    def schemas(self) -> dict[str, dict[str, Any] | None]:
        """Return name -> config schema, sorted by name."""
        return {name: h.config_schema for name, h in self.all().items()}

    def _unknown_message(self, name: str) -> str:
        shown = name if len(name) <= 100 else name[:100] + "..."
        close = difflib.get_close_matches(name, list(self._handlers), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        return (
            f"No handler named {shown!r} is registered.{hint} Handlers come from the modules "
            f'listed in SWITCHYARD["HANDLER_MODULES"].'
        )


def _origin(func: Callable[..., Any]) -> str:
    module = getattr(func, "__module__", "?")
    return f"{module}.{getattr(func, '__qualname__', repr(func))}"


def check_name(name: str) -> None:
    """Raise ValueError unless `name` is a valid handler name."""
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ValueError(
            f"Handler name {name!r} is invalid: use lowercase letters, digits, '_' and '.', "
            "starting with a letter, at most 100 characters."
        )


def check_schema(name: str, schema: object) -> None:
    """Raise TypeError unless `schema` is None or a JSON-schema object for a config."""
    if schema is None:
        return
    if not isinstance(schema, dict):
        raise TypeError(f"Handler {name!r}: config_schema must be a dict (a JSON schema) or None.")
    if schema.get("type", "object") != "object":
        raise TypeError(f'Handler {name!r}: config_schema must describe an object ("type": "object").')


DEFAULT_REGISTRY = Registry()


def node(
    name: str,
    *,
    config_schema: dict[str, Any] | None = None,
    batchable: bool = False,
    tool: Tool | bool = False,
    schema_from: Callable[[Mapping[str, Handler]], dict[str, Any]] | None = None,
) -> Callable[[F], F]:
    """Register the decorated function as the handler `name` (a `tool` agents may call)."""
    return DEFAULT_REGISTRY.node(
        name, config_schema=config_schema, batchable=batchable, tool=tool, schema_from=schema_from
    )


def on_loop(name: str) -> Callable[[A], A]:
    """Register the decorated coroutine as the I/O-bound path of the handler `name`.

    A worker runs such attempts in slots, many at once on its event loop (runtime/slots.py).
    The coroutine must not call the Django ORM (the loop's thread has no connection of its
    own): it hands such work to `runtime.offload.run_sync`.
    """

    def register(coroutine: A) -> A:
        DEFAULT_REGISTRY.add_coroutine(name, coroutine)
        return coroutine

    return register


# How an `on_loop` coroutine of this package runs sync work (the ORM) off the loop. The worker's
# slots install `runtime.offload.run_sync` (their one sync thread, runtime/slots.py); the
# handlers cannot import the runtime (it imports them). Unset: a thread of asyncio's own.
_sync_runner: Callable[..., Awaitable[Any]] | None = None


def use_sync_runner(runner: Callable[..., Awaitable[Any]] | None) -> None:
    global _sync_runner
    _sync_runner = runner


async def run_sync(func: Callable[..., T], *args: Any) -> T:
    """Run `func(*args)` off the event loop, where the runtime says (see `use_sync_runner`)."""
    if _sync_runner is None:
        return await asyncio.to_thread(func, *args)
    result: T = await _sync_runner(func, *args)
    return result


def get_handler(name: str) -> Handler:
    """Return the handler registered under `name`; raise UnknownHandlerError (a KeyError)."""
    return DEFAULT_REGISTRY.get(name)


def registered() -> dict[str, Handler]:
    """Return every registered handler by name, sorted by name."""
    return DEFAULT_REGISTRY.all()


def tools() -> dict[str, Handler]:
    """Return every handler an agent may call, by name, sorted."""
    return DEFAULT_REGISTRY.tools()


def schemas() -> dict[str, dict[str, Any] | None]:
    """Return name -> config schema of every handler (what the graph validator takes)."""
    return DEFAULT_REGISTRY.schemas()


def load_handler_modules(modules: Iterable[str]) -> None:
    """Import each module so that its handlers register; importing twice is a no-op."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name is None or not (module == exc.name or module.startswith(exc.name + ".")):
                raise
            raise ModuleNotFoundError(
                f'Handler module {module!r} (from SWITCHYARD["HANDLER_MODULES"]) was not found: {exc}',
                name=exc.name,
            ) from exc
