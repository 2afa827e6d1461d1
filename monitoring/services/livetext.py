"""Streamed LLM text for the pages: the broadcaster's view of `workflows.llm.streams`' feed.

The broadcaster follows the feed on a path of its own, apart from its snapshot tick
(`broadcaster.stream_texts`): a blocking XREAD returns as soon as a worker appends, and what
it returned is sent at once, per run and per workflow that changed, one message with a piece
of each attempt that moved (under load one read brings many entries, so messages per topic
stay bounded by how fast they are sent, not by the number of tokens):
- usually what it wrote since the last message (`whole: false`, `offset` = where it goes);
- at least every WHOLE_EVERY_SECONDS, and at its end, its whole text so far (`whole: true`;
  the tail, at most TAIL_CHARS, starting at `offset`).
A page appends a piece that continues what it has and replaces its text with a whole one; a
page that missed a piece, or opened mid-stream, waits for the next whole text (at most
WHOLE_EVERY_SECONDS). Sending the whole text every tick instead cost bytes in proportion to
the text's length: at 50 streams of 400 tokens (bench/llm_stream_bench.py) 2 MB/s through
the broadcaster, Redis, Daphne and every client, and 0.8 s of delay at p50.
An attempt seen first mid-stream (broadcaster restarted) is read back from its own stream.
Topics: `llm:run:<id>` (the run page) and `llm:workflow:<id>` (the live page).

An agent's attempt streams turn after turn: its message carries the last marked turn
(`turn`: {"seq", "turn", "state", ...}) and that turn's text only, so a page shows the turn
being written growing, then recorded, then the next one starting empty. A message whose
turn moved on (another turn, or a new state) is whole.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, cast

import redis.asyncio as aioredis

from workflows.llm import streams
from workflows.runtime import bus

TAIL_CHARS = 20_000
WHOLE_EVERY_SECONDS = 2.0
FORGET_AFTER_SECONDS = 120.0
READ_AT_MOST = 5_000
BLOCK_MS = 1_000  # an XREAD waits this long for an entry, then the loop looks at its stop flag


@dataclass
class Text:
    run_id: int
    workflow_id: int
    node_id: str
    attempt: int
    node_run_id: int
    so_far: streams.SoFar
    touched: float = 0.0
    sent: int = 0  # characters of the shown text sent so far
    whole_at: float | None = None  # when the whole text was last sent
    sent_turn: dict[str, Any] | None = None  # the turn the last message carried

    def as_data(self, now: float) -> dict[str, Any]:
        """The next message's piece: what is new since the last one, or the whole text."""
        so_far = self.so_far
        text = so_far.text[so_far.turn_from :] if so_far.turn else so_far.text
        whole = (
            so_far.end is not None
            or self.whole_at is None
            or now - self.whole_at >= WHOLE_EVERY_SECONDS
            or so_far.turn != self.sent_turn
        )
        if whole:
            self.whole_at = now
            piece = text[-TAIL_CHARS:]
            offset = len(text) - len(piece)
        else:
            piece, offset = text[self.sent :], self.sent
        self.sent, self.sent_turn = len(text), so_far.turn
        return {
            "run": self.run_id,
            "node": self.node_id,
            "attempt": self.attempt,
            "node_run": self.node_run_id,
            "chars": len(text),
            "text": piece,
            "offset": offset,
            "whole": whole,
            "turn": so_far.turn,
            "done": so_far.end is not None,
            "error": (so_far.end or {}).get("error"),
        }


class LiveTexts:
    """Follow the feed; say which runs' and workflows' texts changed since the last read."""

    def __init__(self) -> None:
        self.cursor = "$"
        self.texts: dict[tuple[int, int], Text] = {}

    async def start(self, client: aioredis.Redis) -> None:
        """Begin after the feed's newest entry: older attempts are read back when they move."""
        last = cast(list[bus.StreamEntry], await client.xrevrange(streams.FEED, count=1))
        self.cursor = last[0][0] if last else "0-0"

    async def read(
        self, client: aioredis.Redis, block_ms: int = BLOCK_MS
    ) -> list[tuple[str, dict[str, Any]]]:
        """Wait for new feed entries and fold them; return (topic, data) of every run and
        workflow that changed (nothing when `block_ms` passed without an entry)."""
        found = cast(
            bus.StreamReply,
            await client.xread({streams.FEED: self.cursor}, count=READ_AT_MOST, block=block_ms),
        )
        now = time.time()
        changed: dict[tuple[int, int], Text] = {}
        for _, entries in found or []:
            for entry_id, fields in entries:
                self.cursor = entry_id
                text = await self.fold(client, fields, now)
                changed[(text.node_run_id, text.attempt)] = text
        self.forget(now)
        return self.messages(list(changed.values()), now)

    async def fold(self, client: aioredis.Redis, fields: dict[str, str], now: float) -> Text:
        key = (int(fields["nr"]), int(fields["a"]))
        entry = streams.parse_entry("", fields)
        text = self.texts.get(key)
        if text is None or entry.offset > len(text.so_far.text):
            text = await self.read_back(client, fields, key)
        elif entry.offset == len(text.so_far.text):
            text.so_far.add(entry)
        # else: read back already, with what came after it (a read-back reads the attempt's
        # stream up to now). Reading back again for each such entry, as this did, cost an
        # XRANGE of the whole text per entry: a broadcaster behind the feed at 100 streams
        # fell further behind with every read (13 reads in 30 s, 14 s late).
        text.touched = now
        return text

    async def read_back(self, client: aioredis.Redis, fields: dict[str, str], key: tuple[int, int]) -> Text:
        """Rebuild an attempt's text from its own stream (first seen mid-way, or a gap)."""
        entries = cast(list[bus.StreamEntry], await client.xrange(streams.text_key(*key)))
        so_far, _ = streams.fold_entries(entries)
        text = Text(int(fields["r"]), int(fields["w"]), fields["n"], key[1], key[0], so_far)
        self.texts[key] = text
        return text

    def forget(self, now: float) -> None:
        for key in [k for k, t in self.texts.items() if now - t.touched > FORGET_AFTER_SECONDS]:
            del self.texts[key]

    def messages(self, changed: list[Text], now: float) -> list[tuple[str, dict[str, Any]]]:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for text in changed:
            data = text.as_data(now)
            by_topic.setdefault(f"llm:run:{text.run_id}", []).append(data)
            by_topic.setdefault(f"llm:workflow:{text.workflow_id}", []).append(data)
        return [(topic, {"at": time.time(), "streams": items}) for topic, items in by_topic.items()]
