"""Tools for the agent tests: each call leaves a line in a file the run input names, so a
test counts how often a tool really ran, across worker processes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workflows.handlers import HandlerError, NodeContext, Tool, node

NOTE_ARGS: dict[str, Any] = {
    "type": "object",
    "properties": {"note": {"type": "string", "maxLength": 100}},
    "required": ["note"],
    "additionalProperties": False,
}


def log_call(ctx: NodeContext, name: str) -> None:
    with Path(ctx.input["log"]).open("a") as log:
        log.write(f"{name} {ctx.idempotency_key} {ctx.config['note']}\n")


@node("test.record", config_schema=NOTE_ARGS, tool=Tool(timeout_seconds=5, max_attempts=1))
def record(ctx: NodeContext) -> dict[str, Any]:
    """Write the note in the run's log file and return it."""
    log_call(ctx, "record")
    return {"noted": ctx.config["note"]}


@node("test.blocked", config_schema=NOTE_ARGS, tool=Tool(timeout_seconds=5, max_attempts=2))
def blocked(ctx: NodeContext) -> dict[str, Any]:
    """Fail unexpectedly while the run's `block` file exists; else write the note and return it."""
    if Path(ctx.input["block"]).exists():
        raise RuntimeError(f"blocked by {ctx.input['block']}")
    log_call(ctx, "blocked")
    return {"noted": ctx.config["note"]}


@node("test.refuse", config_schema=NOTE_ARGS, tool=True)
def refuse(ctx: NodeContext) -> dict[str, Any]:
    """Refuse every call with a HandlerError (the model is told)."""
    raise HandlerError(f"nothing found for {ctx.config['note']!r}")
