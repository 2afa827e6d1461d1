"""One MCP tool call of an agent's attempt: prepared (sync), made (async), its answer kept for replay.

The agent loop (workflows/agents/loop.py) records the call as a tool step exactly like a
handler tool's; this module is what lies between it and the server:

- `prepare` (sync, ORM: on a slot's sync thread): in a fork that replays its origin's calls,
  the recorded answer (handlers/recordings.py; a `recorded` fork missing it raises
  ReplayMiss); else what the live call needs: the server's connection with its secrets
  revealed, the attempt's `traceparent`, the result limit.
- `make` (async, on the worker's slot loop, or under asyncio.run outside a worker): the call
  with the SDK, bounded by the server's timeout and what is left of the attempt, sent with
  `_meta` carrying the step's idempotency key (`io.switchyard/idempotency-key`, the same in
  every attempt that makes the call) and the `traceparent` (also an HTTP header on the
  streamable HTTP transport).
- `keep` (sync): records the answer for replay. Results and errors are redacted as they
  come back (`redaction`: a secret's value revealed for a header becomes `[secret:NAME]`).

Every failure is an `Outcome` with an error the model is told (bounded by the loop), never
an exception: a server down, slow, speaking malformed JSON-RPC, a tool's own error, a
result over the limit (cut, saying so), a server deleted since the attempt started.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings

from workflows.core import callhash
from workflows.handlers import NodeContext, recordings as replays
from workflows.mcp import client, servers
from workflows.store import redaction, traceids
from workflows.store.mcpservers import McpServer

IDEMPOTENCY_META = "io.switchyard/idempotency-key"


@dataclass(frozen=True)
class Outcome:
    """How the call ended: its result, or the error the model is told; `replayed` if it came
    from the origin's record."""

    result: Any = None
    error: str = ""
    replayed: bool = False


@dataclass(frozen=True)
class Prepared:
    """What a live call needs."""

    connection: client.Connection
    tool: str
    traceparent: str | None
    max_bytes: int


def split(name: str) -> tuple[str, str]:
    """`mcp:files/read` -> ("files", "read")."""
    server, _, tool = name.removeprefix("mcp:").partition("/")
    return server, tool


def prepare(ctx: NodeContext, name: str, arguments: dict[str, Any]) -> Prepared | Outcome:
    """The recorded answer in a replaying fork, or what the live call needs (sync)."""
    recorded = replays.recorded_answer(ctx, callhash.tool_request(name, arguments), f"tool {name}")
    if recorded is not None:
        answer = recorded.response or {}
        return Outcome(answer.get("result"), str(answer.get("error", "")), replayed=True)
    server, tool = split(name)
    row = McpServer.objects.filter(name=server).first()
    if row is None:
        return Outcome(error=f"MCP server {server!r} is no longer registered")
    try:
        connection = servers.connection(row)
    except client.McpFailed as exc:
        return Outcome(error=str(exc))
    traceparent = traceids.traceparent_of(ctx.run_id, ctx.node_id, ctx.attempt) if ctx.node_run_id else None
    return Prepared(connection, tool, traceparent, int(settings.SWITCHYARD["MCP_MAX_RESULT_BYTES"]))


async def make(ctx: NodeContext, call: Prepared, arguments: dict[str, Any], key: str) -> Outcome:
    """Make the live call (async); every failure is an Outcome with its error."""
    meta: dict[str, Any] = {IDEMPOTENCY_META: key}
    if call.traceparent:
        meta["traceparent"] = call.traceparent
    if ctx.remaining() <= 0:
        return Outcome(error=f"no time left before node {ctx.node_id!r} reaches its deadline")
    try:
        answer = await client.call_tool(
            call.connection,
            call.tool,
            arguments,
            timeout_seconds=ctx.remaining(),
            max_bytes=call.max_bytes,
            meta=meta,
            traceparent=call.traceparent,
        )
    except client.McpFailed as exc:
        return Outcome(error=redaction.redact(str(exc)))
    # A server may echo what it was sent: a revealed header's value never reaches the step.
    return Outcome(redaction.redact_value(answer.result), redaction.redact(answer.error))


def keep(ctx: NodeContext, name: str, arguments: dict[str, Any], outcome: Outcome) -> None:
    """Record a live call's answer for replay, secret values redacted (sync)."""
    if outcome.replayed:
        return
    answer = {"error": outcome.error} if outcome.error else {"result": outcome.result}
    replays.record_live(ctx, callhash.tool_request(name, arguments), answer, f"tool {name}")
