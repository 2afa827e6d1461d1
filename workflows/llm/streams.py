"""Streamed LLM text in Redis: one stream per node attempt, and one feed for the broadcaster.

The worker's `TextWriter` coalesces deltas (at most one write every FLUSH_SECONDS) and
appends each piece to the attempt's stream `sy:llm:text:<noderun>:<attempt>` (replayed
then followed by the SSE endpoint) and to the feed `sy:llm:live` (read by the broadcaster,
which pushes the text to the run and workflow pages a few times a second). The attempt's
stream ends with an `end` entry holding the node's output, or its error.

Nothing here is the only copy: the final text is the node's output in Postgres. Streams
expire TEXT_TTL_SECONDS after their last write. A retried attempt writes a stream of its
own, so a page shows the restart (attempt 2 starts empty) and never a spliced text.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from workflows.models import NodeRun
from workflows.runtime import bus

FEED = "sy:llm:live"
FEED_MAXLEN = 20_000
FLUSH_SECONDS = 0.1
TEXT_TTL_SECONDS = 3600
END_FIELD = "end"


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

    def on_delta(self, text: str) -> None:
        self.pending.append(text)
        if time.monotonic() - self.flushed_at >= self.flush_seconds:
            self.flush()

    def flush(self) -> None:
        self.flushed_at = time.monotonic()
        if not self.pending:
            return
        piece = "".join(self.pending)
        self.pending.clear()
        self.write({"d": piece, "o": str(self.written)})
        self.written += len(piece)

    def finish(self, output: dict[str, Any] | None = None, error: str | None = None) -> None:
        """Write what is pending and the end: the node's output, or the attempt's error."""
        self.flush()
        end = {"output": output} if error is None else {"error": error}
        self.write({END_FIELD: json.dumps(end), "o": str(self.written)})

    def write(self, fields: dict[str, str]) -> None:
        key = text_key(self.attempt.node_run_id, self.attempt.attempt)
        pipe = bus.client().pipeline(transaction=False)
        pipe.xadd(key, fields)
        pipe.expire(key, TEXT_TTL_SECONDS)
        pipe.xadd(FEED, {**fields, **self.attempt.feed_fields()}, maxlen=FEED_MAXLEN, approximate=True)
        pipe.execute()


def attempt_of(node_run_id: int, attempt: int) -> Attempt:
    """Read which run, workflow and node an attempt row belongs to."""
    row = NodeRun.objects.select_related("run").only("run__workflow_id", "node_id").get(id=node_run_id)
    return Attempt(node_run_id, attempt, row.run_id, row.run.workflow_id, row.node_id)


@dataclass
class Entry:
    """One stream entry, parsed: a text piece at an offset, or the end."""

    id: str
    text: str = ""
    offset: int = 0
    end: dict[str, Any] | None = None


def parse_entry(entry_id: str, fields: dict[str, str]) -> Entry:
    end = json.loads(fields[END_FIELD]) if END_FIELD in fields else None
    return Entry(entry_id, fields.get("d", ""), int(fields.get("o", "0") or 0), end)


def read_text(node_run_id: int, attempt: int) -> tuple[str, dict[str, Any] | None, str]:
    """Return an attempt's text so far, its end (None while streaming) and the last entry id."""
    entries = [parse_entry(i, f) for i, f in bus.client().xrange(text_key(node_run_id, attempt))]
    end = next((e.end for e in entries if e.end is not None), None)
    return "".join(e.text for e in entries), end, entries[-1].id if entries else "0-0"
