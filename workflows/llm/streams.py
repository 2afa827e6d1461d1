"""Streamed LLM text in Redis: one stream per node attempt, and one feed for the broadcaster.

The worker's `TextWriter` coalesces deltas by time and size (a write when FLUSH_SECONDS passed
since the last one, or FLUSH_CHARS are pending) and appends each piece to the attempt's stream `sy:llm:text:<noderun>:<attempt>` (replayed
then followed by the SSE endpoint) and to the feed `sy:llm:live` (read by the broadcaster,
which pushes each piece on to the run and workflow pages as it comes). The attempt's
stream ends with an `end` entry holding the node's output, or its error.

An `llm.agent` attempt writes all its model turns into its one stream, each between two
`turn` entries: {"seq", "turn", "state": "started"} before its first text (`seq` is the
step's number, `turn` the how-many-th model turn of the loop), then {"state": "recorded",
"finish_reason", "tool_calls": [names]} once the turn is a recorded step in Postgres, or
{"state": "failed", "error"}; its text entries carry the turn's `seq` (field `t`). While
the model streams tool calls, {"state": "calling", "calls": [{"name", "arguments"}]} says
what they are so far (arguments' text cut at CALL_PREVIEW_CHARS), coalesced as text is.
Offsets count characters over the attempt's whole text, all turns together.

Nothing here is the only copy: the final text is the node's output in Postgres. Streams
expire about TEXT_TTL_SECONDS after their last write (the expiry is renewed with the first
entry, then at most every EXPIRE_EVERY_SECONDS, and with the end). A retried attempt writes
a stream of its own, so a page shows the restart (attempt 2 starts empty) and never a
spliced text.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, cast

from django.db import connection

from workflows.core.toolcalls import ToolCalls
from workflows.handlers import HandlerError, NodeContext
from workflows.runtime import bus, offload
from workflows.store.models import NodeRun
from workflows.store.statements import NODES, RUNS

FEED = "sy:llm:live"
FEED_MAXLEN = 20_000
# A delta waits at most this long for company before it is written. 0.1 s put 50 ms on the
# median token and 100 ms on the worst; at 0.02 s (the slots' outbox flushes every 0.02 s too)
# a 20 tokens/s stream writes each token as it comes, and a fast one (200 tokens/s) writes
# 50 pieces a second instead of 200: Redis entries per stream are bounded, latency is not
# traded for them (bench/llm_stream_bench.py, docs/benchmarks.md "LLM streams").
FLUSH_SECONDS = 0.02
FLUSH_CHARS = 2_000  # a burst (a cached answer arriving at once) is written without waiting
TEXT_TTL_SECONDS = 3600
# An EXPIRE with every entry was a third of a stream's Redis commands (an agent of 3 turns
# writes a dozen entries in 6 s).
EXPIRE_EVERY_SECONDS = 60.0
END_FIELD = "end"
TURN_FIELD = "turn"
STARTED, CALLING, RECORDED, FAILED = "started", "calling", "recorded", "failed"  # a turn's states
CALL_PREVIEW_CHARS = 500  # of a tool call's arguments, while they stream in


def text_key(node_run_id: int, attempt: int) -> str:
    return f"sy:llm:text:{node_run_id}:{attempt}"


@dataclass(frozen=True)
class Attempt:
    """Which attempt a stream belongs to (what the pages need to place it)."""

    node_run_id: int
    attempt: int
    run_id: int
    workflow_id: int
    node_id: str

    def feed_fields(self) -> dict[str, str]:
        return {
            "nr": str(self.node_run_id),
            "a": str(self.attempt),
            "r": str(self.run_id),
            "w": str(self.workflow_id),
            "n": self.node_id,
        }


@dataclass
class TextWriter:
    """Collect an attempt's deltas and write them out, coalesced; `on_delta` for the client."""

    attempt: Attempt
    flush_seconds: float = FLUSH_SECONDS
    pending: list[str] = field(default_factory=list)
    written: int = 0  # characters written so far (the offset of the next piece)
    flushed_at: float = 0.0
    turn: dict[str, Any] | None = None  # the agent turn being written: {"seq", "turn"}
    calls: ToolCalls | None = None  # the turn's tool calls being assembled, not yet written
    expired_at: float | None = None  # when the stream's expiry was last renewed
    flush_soon: bool = False  # a flush is scheduled on the event loop (`flush_if_due`)

    def on_delta(self, text: str) -> None:
        self.pending.append(text)
        self.flush_if_due()

    def on_calls(self, calls: ToolCalls) -> None:
        """The agent turn's tool calls so far: written as a CALLING marker, coalesced."""
        self.calls = calls
        self.flush_if_due()

    def flush_if_due(self) -> None:
        """Flush when FLUSH_SECONDS passed or FLUSH_CHARS are pending; in a worker's slot, once
        the loop has read what arrived with this piece (a callback on the event loop: the
        pieces of one network read come without a pause, and a whole answer often arrives
        in one read, which wrote its first piece, or a tool call's name only, on its own)."""
        due = time.monotonic() - self.flushed_at >= self.flush_seconds
        if not (due or sum(map(len, self.pending)) >= FLUSH_CHARS):
            return
        loop = running_loop() if offload.OUTBOX.get() is not None else None
        if loop is None:
            self.flush()
        elif not self.flush_soon:
            self.flush_soon = True
            loop.call_soon(self.flush)

    def flush(self) -> None:
        self.flushed_at = time.monotonic()
        self.flush_soon = False
        if self.pending:
            piece = "".join(self.pending)
            self.pending.clear()
            fields = {"d": piece, "o": str(self.written)}
            if self.turn is not None:
                fields["t"] = str(self.turn["seq"])
            self.write(fields)
            self.written += len(piece)
        if self.calls is not None and self.turn is not None:
            so_far = [{"name": name, "arguments": preview(text)} for name, text in self.calls.progress()]
            self.write_turn(CALLING, calls=so_far)
        self.calls = None

    def begin_turn(self, seq: int, number: int) -> None:
        """Mark where an agent turn's text starts: step `seq`, the loop's `number`-th turn."""
        self.flush()
        self.turn = {"seq": seq, "turn": number}
        self.write_turn(STARTED)

    def end_turn(self, state: str, **outcome: Any) -> None:
        """Mark the end of the turn being written: RECORDED (a step in Postgres) or FAILED."""
        if self.turn is None:
            return
        self.flush()
        self.write_turn(state, **outcome)
        self.turn = None

    def write_turn(self, state: str, **outcome: Any) -> None:
        assert self.turn is not None
        marker = {**self.turn, "state": state, **outcome}
        self.write({TURN_FIELD: json.dumps(marker), "o": str(self.written)})

    def finish(self, output: dict[str, Any] | None = None, error: str | None = None) -> None:
        """Write what is pending and the end: the node's output, or the attempt's error."""
        self.flush()
        end = {"output": output} if error is None else {"error": error}
        self.write({END_FIELD: json.dumps(end), "o": str(self.written)})

    def write(self, fields: dict[str, str]) -> None:
        """Write an entry now, or, in a worker's slot, into the slots' next batched write."""
        now = time.monotonic()
        expire = self.expired_at is None or now - self.expired_at >= EXPIRE_EVERY_SECONDS
        if expire or END_FIELD in fields:
            self.expired_at, expire = now, True
        outbox = offload.OUTBOX.get()
        if outbox is not None:
            outbox.append(lambda pipe: self.add_commands(pipe, fields, expire))
            return
        pipe = bus.client().pipeline(transaction=False)
        self.add_commands(pipe, fields, expire)
        pipe.execute()

    def add_commands(self, pipe: Any, fields: dict[str, str], expire: bool = True) -> None:
        key = text_key(self.attempt.node_run_id, self.attempt.attempt)
        pipe.xadd(key, cast(bus.StreamFields, fields))
        if expire:
            pipe.expire(key, TEXT_TTL_SECONDS)
        pipe.xadd(
            FEED,
            cast(bus.StreamFields, {**fields, **self.attempt.feed_fields()}),
            maxlen=FEED_MAXLEN,
            approximate=True,
        )


def running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def preview(arguments: str) -> str:
    return arguments if len(arguments) <= CALL_PREVIEW_CHARS else arguments[:CALL_PREVIEW_CHARS] + "…"


ATTEMPT_SQL = f"SELECT n.run_id, r.workflow_id, n.node_id FROM {NODES} n JOIN {RUNS} r ON r.id = n.run_id WHERE n.id = %s"


def attempt_of(node_run_id: int, attempt: int) -> Attempt:
    """Read which run, workflow and node an attempt row belongs to (a statement written out:
    the ORM's compiling of it cost more than the query, once per attempt)."""
    with connection.cursor() as cursor:
        cursor.execute(ATTEMPT_SQL, [node_run_id])
        row = cursor.fetchone()
    if row is None:
        raise NodeRun.DoesNotExist(f"no attempt row {node_run_id}")
    return Attempt(node_run_id, attempt, *row)


def writer_for(ctx: NodeContext) -> TextWriter | None:
    """A writer for the context's attempt; None for a context made outside a worker.

    It writes after what the attempt's stream already holds: an agent's attempt resumed after
    a workflow tool's child run continues its own stream, offsets counting on."""
    if not ctx.node_run_id:
        return None
    so_far, _ = read_so_far(ctx.node_run_id, ctx.attempt)
    if ctx.workflow_id:  # the worker's context knows it: no statement
        attempt = Attempt(ctx.node_run_id, ctx.attempt, ctx.run_id, ctx.workflow_id, ctx.node_id)
    else:
        attempt = attempt_of(ctx.node_run_id, ctx.attempt)
    return TextWriter(attempt, written=len(so_far.text))


def streamed(writer: TextWriter | None, produce: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Produce a node's output, then end the attempt's stream with it, or with the HandlerError."""
    try:
        output = produce()
    except HandlerError as exc:
        if writer:
            writer.finish(error=str(exc))
        raise
    if writer:
        writer.finish(output)
    return output


async def astreamed(
    writer: TextWriter | None, produce: Callable[[], Awaitable[dict[str, Any]]]
) -> dict[str, Any]:
    """`streamed` for a coroutine (a worker's slot)."""
    try:
        output = await produce()
    except HandlerError as exc:
        if writer:
            writer.finish(error=str(exc))
        raise
    if writer:
        writer.finish(output)
    return output


@dataclass
class Entry:
    """One stream entry, parsed: a text piece at an offset (of agent turn `seq`), a turn
    marker, or the end."""

    id: str
    text: str = ""
    offset: int = 0
    end: dict[str, Any] | None = None
    turn: dict[str, Any] | None = None
    seq: int | None = None


def parse_entry(entry_id: str, fields: dict[str, str]) -> Entry:
    end = json.loads(fields[END_FIELD]) if END_FIELD in fields else None
    turn = json.loads(fields[TURN_FIELD]) if TURN_FIELD in fields else None
    seq = int(fields["t"]) if fields.get("t") else None
    return Entry(entry_id, fields.get("d", ""), int(fields.get("o", "0") or 0), end, turn, seq)


@dataclass
class SoFar:
    """An attempt's stream folded up: its text, its end, and the agent turn last marked."""

    text: str = ""
    end: dict[str, Any] | None = None
    turn: dict[str, Any] | None = None
    turn_from: int = 0  # where the last marked turn's text starts in `text`

    def add(self, entry: Entry) -> None:
        self.text += entry.text
        self.end = entry.end or self.end
        if entry.turn is not None:
            self.turn = entry.turn
            if entry.turn.get("state") == STARTED:
                self.turn_from = entry.offset


def fold_entries(entries: list[bus.StreamEntry]) -> tuple[SoFar, str]:
    """Fold an attempt's stream entries; return what they hold and the last entry id."""
    so_far, last = SoFar(), "0-0"
    for entry_id, fields in entries:
        so_far.add(parse_entry(entry_id, fields))
        last = entry_id
    return so_far, last


def read_so_far(node_run_id: int, attempt: int) -> tuple[SoFar, str]:
    """Fold an attempt's stream so far; return it and the last entry id."""
    return fold_entries(cast(list[bus.StreamEntry], bus.client().xrange(text_key(node_run_id, attempt))))


def read_text(node_run_id: int, attempt: int) -> tuple[str, dict[str, Any] | None, str]:
    """Return an attempt's text so far, its end (None while streaming) and the last entry id."""
    so_far, last = read_so_far(node_run_id, attempt)
    return so_far.text, so_far.end, last
