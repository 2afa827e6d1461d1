"""Follow one attempt's streamed text without a thread: replay, then live, then the end.

For the SSE endpoint under Daphne: everything here awaits (redis.asyncio, XREAD BLOCK),
and the database is asked, in a short sync call, only when the stream has been quiet for
QUIET_SECONDS, whether the attempt is over without an end entry (a worker killed mid-stream,
a timeout, a cancel): then the follower ends with the node's state, instead of waiting forever.
A quiet stream yields a keep-alive comment every KEEPALIVE_SECONDS, so proxies and clients
that drop idle connections keep this one.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, cast

import redis.asyncio as aioredis
from channels.db import database_sync_to_async
from django.conf import settings

from workflows.core.states import NodeStatus
from workflows.llm import streams
from workflows.runtime.bus import StreamEntry, StreamReply
from workflows.store.models import NodeRun

QUIET_SECONDS = 1.0
KEEPALIVE_SECONDS = 15.0
READ_AT_MOST = 500
IN_FLIGHT = (NodeStatus.QUEUED, NodeStatus.RUNNING, NodeStatus.FAILED)  # failed: retry or dead, not yet known


@dataclass(frozen=True)
class Event:
    """One server-sent event: its name, its id (a stream entry id, for Last-Event-ID) and data."""

    name: str
    data: dict[str, Any]
    id: str = ""

    def encode(self) -> str:
        if not self.name:
            return ": keep-alive\n\n"  # a comment: clients ignore it
        head = f"id: {self.id}\n" if self.id else ""
        return f"{head}event: {self.name}\ndata: {json.dumps(self.data, ensure_ascii=False)}\n\n"


KEEPALIVE = Event("", {})


def node_state(node_run_id: int, attempt: int) -> dict[str, Any] | None:
    """The attempt's end as the database has it, or None while it may still stream."""
    node = NodeRun.objects.only("attempt", "status", "output", "error").get(id=node_run_id)
    if node.attempt > attempt:
        return {"abandoned": True, "status": "superseded", "next_attempt": node.attempt}
    if node.attempt < attempt or node.status in IN_FLIGHT:
        return None
    if node.status == NodeStatus.SUCCEEDED:
        return {"status": node.status, "output": node.output}
    if node.status == NodeStatus.RETRYING:  # the next attempt is due: follow it
        return {"abandoned": True, "status": node.status, "error": node.error, "next_attempt": attempt + 1}
    return {"status": node.status, "error": node.error}


def as_events(entries: list[StreamEntry]) -> list[Event]:
    events = []
    for entry_id, fields in entries:
        entry = streams.parse_entry(entry_id, fields)
        if entry.end is not None:
            events.append(Event("end", entry.end, entry_id))
        elif entry.turn is not None:
            events.append(Event("turn", entry.turn, entry_id))
        else:
            text = {"text": entry.text, "offset": entry.offset}
            events.append(Event("text", text if entry.seq is None else {**text, "turn": entry.seq}, entry_id))
    return events


async def follow(node_run_id: int, attempt: int, after: str = "0-0") -> AsyncIterator[Event]:
    """Yield the attempt's text events after entry `after`, live, and one `end` event last."""
    key = streams.text_key(node_run_id, attempt)
    client = aioredis.Redis.from_url(settings.REDIS_URL, decode_responses=True)
    # In an executor's thread, which no request ends: Channels' wrapper gives the connection
    # back after each read (to the web process's pool, where it would stay checked out).
    state = database_sync_to_async(node_state, thread_sensitive=False)
    quiet = 0.0
    try:
        while True:
            reply = await client.xread({key: after}, count=READ_AT_MOST, block=int(QUIET_SECONDS * 1000))
            found = cast(StreamReply, reply)
            entries = found[0][1] if found else []
            for event in as_events(entries):
                after = event.id
                yield event
                if event.name == "end":
                    return
            if entries:
                quiet = 0.0
                continue
            quiet += QUIET_SECONDS
            if quiet >= KEEPALIVE_SECONDS:
                quiet = 0.0
                yield KEEPALIVE
            end = await state(node_run_id, attempt)
            if end is not None:
                # The end entry may have landed between the read and the check: read once more.
                rest = await client.xrange(key, min=f"({after}" if after != "0-0" else "-")
                for event in as_events(cast(list[StreamEntry], rest)):
                    yield event
                    if event.name == "end":
                        return
                yield Event("end", end)
                return
    finally:
        await client.aclose()
