"""Streamed text's fast path: the broadcaster sends what the feed brings, without a tick."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import redis.asyncio as aioredis
from asgiref.sync import async_to_sync
from django.conf import settings as django_settings

from monitoring.services import events
from monitoring.services.broadcaster import Broadcaster, stream_texts
from monitoring.services.livetext import LiveTexts
from workflows.llm.streams import Attempt, TextWriter
from workflows.runtime import bus

ATTEMPT = Attempt(node_run_id=9101, attempt=1, run_id=9102, workflow_id=9103, node_id="ask")


def writer() -> TextWriter:
    bus.client().delete("sy:llm:text:9101:1")
    return TextWriter(ATTEMPT)


def test_a_read_returns_each_piece_once_for_the_run_and_the_workflow_page() -> None:
    async def scenario() -> list[list[tuple[str, dict[str, Any]]]]:
        client = aioredis.Redis.from_url(django_settings.REDIS_URL, decode_responses=True)
        texts = LiveTexts()
        await texts.start(client)
        out = writer()
        out.on_delta("Hello")  # the first delta is written at once
        first = await texts.read(client, block_ms=1000)
        out.pending.append(", world")
        out.flush()
        second = await texts.read(client, block_ms=1000)
        await client.aclose()
        return [first, second]

    first, second = async_to_sync(scenario)()
    assert [topic for topic, _ in first] == ["llm:run:9102", "llm:workflow:9103"]
    piece = first[0][1]["streams"][0]
    assert (piece["text"], piece["offset"], piece["whole"]) == ("Hello", 0, True)
    piece = second[0][1]["streams"][0]
    assert (piece["text"], piece["offset"], piece["whole"]) == (", world", 5, False)


def test_the_writer_coalesces_deltas_by_time_and_by_size() -> None:
    out = writer()
    out.on_delta("a")  # written: nothing was written before
    out.flush_seconds = 3600.0
    out.on_delta("b")
    assert out.pending == ["b"], "held back: written less than flush_seconds ago"
    out.on_delta("x" * 2_000)
    assert out.pending == [] and out.written == 2_002, "a burst is written without waiting"


def test_the_broadcaster_publishes_a_piece_stamped_without_waiting_for_a_tick(settings: Any) -> None:
    settings.MONITOR = {**settings.MONITOR, "INTERVAL_SECONDS": 3600.0}  # no tick could send it

    async def scenario() -> str:
        client = aioredis.Redis.from_url(django_settings.REDIS_URL, decode_responses=True)
        pubsub = client.pubsub(ignore_subscribe_messages=True)
        await pubsub.subscribe(bus.scoped(events.LIVE_CHANNEL))
        stop = asyncio.Event()
        task = asyncio.create_task(stream_texts(Broadcaster(), stop))
        await asyncio.sleep(0.3)  # it has read the feed's newest entry: it starts after it
        await asyncio.to_thread(lambda: writer().on_delta("Hi"))
        message = None
        for _ in range(100):
            message = await pubsub.get_message(timeout=0.1)
            if message is not None:
                break
        stop.set()
        task.cancel()
        await pubsub.aclose()  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
        await client.aclose()
        assert message is not None, "nothing was published"
        return str(message["data"])

    lines = async_to_sync(scenario)().split("\n")
    assert [line.split(" ")[0] for line in lines] == ["llm:run:9102", "llm:workflow:9103"]
    topic, _, text = lines[0].partition(" ")
    sent = json.loads(text)
    assert topic == sent["topic"] == "llm:run:9102"
    assert sent["seq"] == 1 and sent["epoch"] > 0
    assert sent["data"]["streams"][0]["text"] == "Hi"


def test_entries_already_read_back_are_skipped_not_read_back_again() -> None:
    """A page's text first seen mid-way is read back from its stream up to now; the feed's
    entries it already holds must not each read the whole stream back again."""

    async def scenario() -> tuple[list[str], int]:
        client = aioredis.Redis.from_url(django_settings.REDIS_URL, decode_responses=True)
        texts = LiveTexts()
        await texts.start(client)
        out = writer()
        for word in ("one ", "two ", "three "):
            out.pending.append(word)
            out.flush()
        reads = 0
        read_back = texts.read_back

        async def counted(*args: Any) -> Any:
            nonlocal reads
            reads += 1
            return await read_back(*args)

        texts.read_back = counted  # type: ignore[method-assign]  # counting the calls
        found = await texts.read(client, block_ms=1000)
        await client.aclose()
        return [data["streams"][0]["text"] for _, data in found], reads

    shown, reads = async_to_sync(scenario)()
    assert reads == 1, "one read-back for the attempt first seen, none for the entries it held"
    assert shown == ["one two three "] * 2
