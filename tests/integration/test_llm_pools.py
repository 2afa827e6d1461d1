"""The slots' LLM calls keep their connections between turns (workflows/llm/client.py).

A worker's slots call in waves: hundreds of turns end together and the next ones start
together. Each wave must find the connections the last one left open, however many there
were; a server on a real socket counts the connections it accepted.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from workflows.llm import client
from workflows.llm.demo_server import completion_chunks
from workflows.llm.providers import Endpoint

WAVE = 150  # more than httpx's default of 100 kept alive
COMPLETION = {
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1},
}
ANSWERS = {  # content type -> body: one JSON body, or server-sent chunks ending with [DONE]
    b"application/json": json.dumps(COMPLETION).encode(),
    b"text/event-stream": b"".join(completion_chunks(COMPLETION)),
}


async def waves(count: int, kind: bytes = b"application/json") -> int:
    """Make `count` waves of WAVE concurrent calls; return the connections the server accepted."""
    body = ANSWERS[kind]
    accepted = 0

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                await reader.readexactly(length)
                await asyncio.sleep(0.2)  # the whole wave is in flight at once
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: " + kind + b"\r\nContent-Length: "
                    + str(len(body)).encode() + b"\r\n\r\n" + body
                )  # fmt: skip
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, backlog=1024)
    port = server.sockets[0].getsockname()[1]
    endpoint = Endpoint("pools", f"http://127.0.0.1:{port}/v1", "k", "m", 10.0, False)
    messages = [{"role": "user", "content": "hi"}]
    async with server:
        for wave in range(count):
            streamed = {"on_delta": lambda text: None} if kind == b"text/event-stream" else {}
            calls = [
                client.acomplete(
                    endpoint,
                    messages,
                    idempotency_key=f"{wave}:{n}",
                    timeout_seconds=10.0,
                    where="w",
                    **streamed,
                )
                for n in range(WAVE)
            ]
            assert all(c.text == "ok" for c in await asyncio.gather(*calls))
    return accepted


@pytest.mark.parametrize("kind", sorted(ANSWERS))
def test_a_second_wave_of_calls_reuses_the_connections_of_the_first(kind: bytes) -> None:
    accepted = asyncio.run(waves(2, kind))
    # One connection a call of the first wave; the second opens at most one more per pool
    # (the calls are spread over the pools in turn, and a pool may get one more than before).
    # With 100 connections kept alive it opened 50 again; streamed answers left unread after
    # their [DONE] opened all 150 again (client.drained).
    assert WAVE <= accepted <= WAVE + client.POOLS, accepted


async def held_open_after_done() -> client.Completion:
    """One streamed call to a server that sends [DONE] and then holds its chunked body open."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        body = ANSWERS[b"text/event-stream"]
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        writer.write(head + f"{len(body):x}\r\n".encode() + body + b"\r\n")
        await writer.drain()
        await asyncio.sleep(30)  # never ends its body; cancelled when the server closes

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    endpoint = Endpoint("held", f"http://127.0.0.1:{port}/v1", "k", "m", 10.0, False)
    async with server:
        return await client.acomplete(
            endpoint, [{"role": "user", "content": "hi"}], idempotency_key="held",
            timeout_seconds=5.0, where="w", on_delta=lambda text: None,
        )  # fmt: skip


def test_a_stream_held_open_after_done_still_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    # Reading on to the end would wait for the call's timeout (5 s) and fail it.
    monkeypatch.setattr(client, "DRAIN_SECONDS", 0.1)
    assert asyncio.run(held_open_after_done()).text == "ok"
