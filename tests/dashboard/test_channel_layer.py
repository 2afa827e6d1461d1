"""The consumer on the real channel layer (channels-redis on the test Redis), not in memory."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from monitoring.services import events
from tests.dashboard.test_consumers import communicator, session_cookie

pytestmark = pytest.mark.django_db(transaction=True)

QUIET_SECONDS = 7  # longer than the layer's 5 s wait for a message (and redis-py's default timeout)


def test_a_websocket_on_a_quiet_topic_stays_open_and_gets_the_next_message(role_user: Any) -> None:
    """channels-redis waits 5 s per BZPOPMIN; with redis-py 8's default 5 s read timeout the
    consumer died of "Timeout reading from" on the first quiet stretch."""
    headers = session_cookie(role_user("viewer"))
    topic = "llm:run:424242"

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
