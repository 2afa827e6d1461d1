"""Streamed LLM text of one node attempt as Server-Sent Events: replay, follow, end.

An async view under Daphne: the response is an async iterator over Redis (XREAD BLOCK), so
a client holds no thread. Events: `text` ({"text", "offset"}: append in order; each has an
`id`, so a client reconnecting with `Last-Event-ID` gets only what it missed), keep-alive
comments while the stream is quiet, then one `end`
({"output"} of the node, or {"error"}, or {"abandoned": true, "next_attempt"} when a newer
attempt took over or a retry is due: follow that attempt's stream instead; its text starts
again from the beginning).

An `llm.agent` node's attempt streams each model turn between two `turn` events: {"seq",
"turn", "state": "started"} before the turn's text, then {"seq", "turn", "state":
"recorded", "finish_reason", "tool_calls": [names]} once the turn is a recorded step (or
"failed" with "error"); between them, {"state": "calling", "calls": [{"name", "arguments"}]}
as the model writes tool calls (arguments' text so far); its `text` events carry the turn's
step number as "turn". Offsets count over the attempt's whole text. The tool calls between turns are the node's steps
(`GET .../nodes/{node}/steps`).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Annotated, Any

from asgiref.sync import sync_to_async
from django.db import connection
from django.http import HttpRequest, StreamingHttpResponse
from ninja import Path, Router

from workflows.api.auth import allowed
from workflows.api.parsing import MAX_ID
from workflows.api.schema import answers_as, refuses
from workflows.llm import follow
from workflows.store.errors import NotFound
from workflows.store.models import NodeRun

router = Router(tags=["runs"])
RunId = Annotated[int, Path(ge=1, le=MAX_ID)]
NodePath = Annotated[str, Path(pattern=r"^[A-Za-z_][A-Za-z0-9_\-]{0,63}$")]
AttemptNumber = Annotated[int, Path(ge=1, le=10_000)]
ENTRY_ID = re.compile(r"^\d{1,20}-\d{1,20}$")
SSE_SCHEMA = {
    "type": "string",
    "description": (
        "event: text (data {text, offset[, turn]}); for llm.agent, event: turn (data {seq, turn, state:"
        " started | calling | recorded | failed, ...}) around each model turn (calling: the tool calls"
        " written so far); then one event: end"
        " (data {output} | {error} | {abandoned})"
    ),
}


def find_node_run(run_id: int, node_id: str, attempt: int) -> int:
    """The attempt's node row; then the request's database connection goes back to the web
    process's pool (a follower may stream for minutes, and would hold it until its end)."""
    try:
        row = NodeRun.objects.filter(run_id=run_id, node_id=node_id).values_list("id", "attempt").first()
    finally:
        # Not Channels' database_sync_to_async here: its close_old_connections closes a
        # connection inside a caller's transaction too (a test client's), and breaks it.
        if not connection.in_atomic_block:
            connection.close()
    if row is None:
        raise NotFound(f"Run {run_id} has no node {node_id!r}.")
    if attempt > row[1] + 1:
        raise NotFound(
            f"Node {node_id!r} of run {run_id} has made {row[1]} attempt(s); attempt {attempt} is not next."
        )
    return int(row[0])


@router.get(
    "/runs/{id:run_id}/nodes/{node_id}/attempts/{attempt}/stream",
    response={200: None},
    auth=allowed("view"),
    summary="Follow a node attempt's streamed LLM text (Server-Sent Events)",
)
@answers_as("text/event-stream", SSE_SCHEMA)
@refuses(404)
async def stream_attempt(
    request: HttpRequest, run_id: RunId, node_id: NodePath, attempt: AttemptNumber
) -> Any:
    """Replay what the attempt has streamed so far, follow it live, end with the node's output."""
    node_run_id = await sync_to_async(find_node_run)(run_id, node_id, attempt)
    last = request.headers.get("Last-Event-ID", "")
    after = last if ENTRY_ID.match(last) else "0-0"
    response = StreamingHttpResponse(
        encoded(follow.follow(node_run_id, attempt, after)), content_type="text/event-stream"
    )
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


async def encoded(events: AsyncIterator[follow.Event]) -> AsyncIterator[bytes]:
    """The events as bytes, after an opening that sends the headers at once.

    Daphne writes the headers with the first piece of the body: without the opening, a client
    following an attempt that has not started yet would wait for its headers until the first
    token. `retry` tells a reconnecting client to wait 2 s.
    """
    yield b"retry: 2000\n\n"
    async for event in events:
        yield event.encode().encode()
