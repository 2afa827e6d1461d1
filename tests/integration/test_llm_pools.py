"""The slots' LLM calls keep their connections between turns (workflows/llm/client.py).

A worker's slots call in waves: hundreds of turns end together and the next ones start
together. Each wave must find the connections the last one left open, however many there
were; a server on a real socket counts the connections it accepted.
"""

from __future__ import annotations

import asyncio
import json

from workflows.llm import client
from workflows.llm.providers import Endpoint

WAVE = 150  # more than httpx's default of 100 kept alive
ANSWER = json.dumps(
    {
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
    }
).encode()


async def waves(count: int) -> int:
    """Make `count` waves of WAVE concurrent calls; return the connections the server accepted."""
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
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                    + str(len(ANSWER)).encode()
                    + b"\r\n\r\n"
                    + ANSWER
                )
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
            calls = [
                client.acomplete(
                    endpoint, messages, idempotency_key=f"{wave}:{n}", timeout_seconds=10.0, where="w"
                )
                for n in range(WAVE)
            ]
            assert all(c.text == "ok" for c in await asyncio.gather(*calls))
    return accepted


def test_a_second_wave_of_calls_reuses_the_connections_of_the_first() -> None:
    accepted = asyncio.run(waves(2))
    # One connection a call of the first wave; the second opens at most one more per pool
    # (the calls are spread over the pools in turn, and a pool may get one more than before).
    # With 100 connections kept alive it opened 50 again.
    assert WAVE <= accepted <= WAVE + client.POOLS, accepted
