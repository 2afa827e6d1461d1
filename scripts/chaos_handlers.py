"""Handlers for `make chaos` that keep a ledger of every execution (scripts/chaos.py).

Each handler appends one line, `what<TAB>key<TAB>unix time`, to the file CHAOS_LEDGER names
before it does its (deterministic) work. scripts/chaos.py compares the ledger with what
PostgreSQL recorded: an execution that began after its map item, tool call or compensation
step was recorded as finished is a repeat that at-least-once delivery does not excuse.
Loaded by the chaos run's processes only, through SWITCHYARD_HANDLER_MODULES.
"""

from __future__ import annotations

import os
import time
import zlib
from typing import Any

from workflows.handlers.registry import NodeContext, Tool, node

NO_CONFIG: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
ORDER_ARGS: dict[str, Any] = {
    "type": "object",
    "properties": {"order_id": {"type": "string", "pattern": "^[A-Z]-[0-9]{3,6}$", "default": "A-1000"}},
    "required": ["order_id"],
    "additionalProperties": False,
}


def record(what: str, key: str) -> None:
    """Append one execution to the ledger: a single write below PIPE_BUF, so lines never interleave."""
    line = f"{what}\t{key}\t{time.time():.6f}\n".encode()
    fd = os.open(os.environ["CHAOS_LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


@node("chaos.item", config_schema=NO_CONFIG, batchable=True)
def item(ctx: NodeContext) -> dict[str, Any]:
    """Square one map item, recording the execution."""
    record("item", f"{ctx.run_id}:{ctx.node_id}:{ctx.index}")
    return {"index": ctx.index, "square": int(ctx.item) ** 2}


@node("chaos.lookup", config_schema=ORDER_ARGS, tool=Tool(timeout_seconds=5, max_attempts=2))
def lookup(ctx: NodeContext) -> dict[str, Any]:
    """Look up an order by id (an agent's tool), recording the call under its idempotency key."""
    record("tool", ctx.idempotency_key)
    order_id = str(ctx.config["order_id"])
    return {"order_id": order_id, "status": ["shipped", "delivered"][zlib.crc32(order_id.encode()) % 2]}


@node("chaos.step", config_schema=NO_CONFIG)
def step(ctx: NodeContext) -> dict[str, Any]:
    """Do a saga step: return a receipt derived from the run input."""
    return {"receipt": f"{ctx.node_id}-{ctx.input.get('v')}"}


@node("chaos.undo", config_schema=NO_CONFIG)
def undo(ctx: NodeContext) -> dict[str, Any]:
    """Undo a saga step (a compensation), recording the execution."""
    record("undo", f"{ctx.run_id}:{ctx.node_id}")
    receipt = next(iter(ctx.upstream.values()), {}) or {}
    return {"undone": receipt.get("receipt")}
