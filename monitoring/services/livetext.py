"""Streamed LLM text for the pages: the broadcaster's view of `workflows.llm.streams`' feed.

Each tick reads what the workers appended to the feed since the last tick and sends, per run
and per workflow that changed, one message with a piece of each attempt that moved:
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

from workflows.llm import streams
from workflows.runtime import bus

TAIL_CHARS = 20_000
WHOLE_EVERY_SECONDS = 2.0
FORGET_AFTER_SECONDS = 120.0
READ_AT_MOST = 5_000


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
    """Follow the feed; say which runs' and workflows' texts changed since the last tick."""

    def __init__(self) -> None:
        self.cursor = "$"
        self.texts: dict[tuple[int, int], Text] = {}

    def start(self) -> None:
        """Begin after the feed's newest entry: older attempts are read back when they move."""
        last = cast(list[bus.StreamEntry], bus.client().xrevrange(streams.FEED, count=1))
        self.cursor = last[0][0] if last else "0-0"

    def read(self, now: float) -> list[tuple[str, dict[str, Any]]]:
        """Fold the new feed entries; return (topic, data) of every run and workflow that changed."""
        found = cast(
            bus.StreamReply,
            bus.client().xread({streams.FEED: self.cursor}, count=READ_AT_MOST),
        )
        changed: dict[tuple[int, int], Text] = {}
        for _, entries in found or []:
            for entry_id, fields in entries:
                self.cursor = entry_id
                text = self.fold(fields, now)
                changed[(text.node_run_id, text.attempt)] = text
        self.forget(now)
        return self.messages(list(changed.values()), now)

    def fold(self, fields: dict[str, str], now: float) -> Text:
        key = (int(fields["nr"]), int(fields["a"]))
        entry = streams.parse_entry("", fields)
        text = self.texts.get(key)
        if text is None or entry.offset != len(text.so_far.text):
            text = self.read_back(fields, key)
        else:
            text.so_far.add(entry)
        text.touched = now
        return text

    def read_back(self, fields: dict[str, str], key: tuple[int, int]) -> Text:
        """Rebuild an attempt's text from its own stream (first seen mid-way, or a gap)."""
        so_far, _ = streams.read_so_far(*key)
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
