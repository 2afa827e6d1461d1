"""The consumer on the real channel layer (channels-redis on the test Redis), not in memory, and
on the live topics' own path (services/livefeed.py: Redis pub/sub, one subscriber a process)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis.asyncio as aioredis
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.conf import settings

from monitoring.services import events, livefeed
from tests.dashboard.test_consumers import communicator, session_cookie

pytestmark = pytest.mark.django_db(transaction=True)

QUIET_SECONDS = 7  # longer than the layer's 5 s wait for a message (and redis-py's default timeout)


def test_a_websocket_on_a_quiet_topic_stays_open_and_gets_the_next_message(role_user: Any) -> None:
    """channels-redis waits 5 s per BZPOPMIN; with redis-py 8's default 5 s read timeout the
    consumer died of "Timeout reading from" on the first quiet stretch."""
    headers = session_cookie(role_user("viewer"))
    topic = "workflow:424242"

    async def scenario() -> dict[str, Any]:
        ws = communicator(headers, topic)
        connected, _ = await ws.connect()
        assert connected
        await asyncio.sleep(QUIET_SECONDS)  # nothing is published: the quiet stretch itself
        await events.publish([{"topic": topic, "epoch": 1, "seq": 1, "data": {"at": 0, "streams": []}}])
        message: dict[str, Any] = await ws.receive_json_from(timeout=5)
        await ws.disconnect()
        return message

    message = async_to_sync(scenario)()
    assert message["topic"] == topic and message["data"]["streams"] == []


def live_message(topic: str, seq: int) -> events.Message:
    return {"topic": topic, "epoch": 1, "seq": seq, "data": {"at": 0, "streams": []}}


async def publish_live(*messages: events.Message) -> None:
    client = aioredis.Redis.from_url(settings.REDIS_URL, decode_responses=True)
    await events.publish_live(client, list(messages))
    await client.aclose()


async def subscribed(topic: str) -> None:
    """Wait until this process's live feed reads its channel (a message before is not seen)."""
    for _ in range(100):
        if livefeed.hub.task is not None and topic in livefeed.hub.queues:
            await asyncio.sleep(0.2)  # the SUBSCRIBE's round trip
            return
        await asyncio.sleep(0.05)


def test_a_live_topic_reaches_its_page_past_the_channel_layer_in_order_and_others_do_not(
    role_user: Any,
) -> None:
    headers = session_cookie(role_user("viewer"))
    mine, other = "llm:run:424243", "llm:run:424244"

    async def scenario() -> list[dict[str, Any]]:
        ws = communicator(headers, mine)
        assert (await ws.connect())[0]
        await subscribed(mine)
        await publish_live(live_message(other, 1), live_message(mine, 1), live_message(mine, 2))
        got = [await ws.receive_json_from(timeout=5), await ws.receive_json_from(timeout=5)]
        assert await ws.receive_nothing(timeout=0.3)
        await ws.disconnect()
        return got

    got = async_to_sync(scenario)()
    assert [(m["topic"], m["seq"]) for m in got] == [(mine, 1), (mine, 2)]
    assert mine not in livefeed.hub.queues, "a closed page no longer follows its topic"


def test_a_live_topic_is_not_sent_to_a_user_demoted_meanwhile(role_user: Any, settings: Any) -> None:
    settings.MONITOR = {**settings.MONITOR, "RECHECK_SECONDS": 0}  # ask the database before each send
    user = role_user("viewer")
    headers = session_cookie(user)
    topic = "llm:run:424245"

    async def scenario() -> Any:
        ws = communicator(headers, topic)
        assert (await ws.connect())[0]
        await subscribed(topic)
        await database_sync_to_async(lambda: user.groups.clear())()
        await publish_live(live_message(topic, 1))
        return await ws.receive_output(timeout=5)

    assert async_to_sync(scenario)() == {"type": "websocket.close", "code": 4403}
