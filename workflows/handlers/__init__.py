"""Node handlers: the registry (pure) and the modules that fill it (builtin, demo).

Importing this package loads no handler module; `load_handler_modules` does, from the
list in `SWITCHYARD["HANDLER_MODULES"]` (see `workflows.apps`). In the runtime layer: the
registry and the built-in handlers import the core only.
"""

from __future__ import annotations

from workflows.handlers.registry import (
    Handler,
    HandlerError,
    NodeContext,
    Tool,
    UnknownHandlerError,
    get_handler,
    is_retryable,
    load_handler_modules,
    node,
    on_loop,
    registered,
    schemas,
    tools,
)

__all__ = [
    "Handler",
    "HandlerError",
    "NodeContext",
    "Tool",
    "UnknownHandlerError",
    "get_handler",
    "is_retryable",
    "load_handler_modules",
    "node",
    "on_loop",
    "registered",
    "schemas",
    "tools",
]
