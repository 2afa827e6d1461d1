"""Pub/sub announcements stay within one Redis database, and a stray one harms no scheduler."""

from __future__ import annotations

import json

import pytest

from workflows.runtime import bus
from workflows.runtime.scheduler import VersionWatcher

pytestmark = pytest.mark.django_db


def test_an_announcement_is_heard_only_on_the_channel_of_its_database() -> None:
    db = int(bus.client().connection_pool.connection_kwargs.get("db") or 0)
    pubsub = bus.client().pubsub()
    pubsub.subscribe(bus.scoped(bus.VERSIONS_CHANNEL))
    confirmed = pubsub.get_message(timeout=5.0)  # the subscription holds before anything is sent
    assert confirmed is not None and confirmed["type"] == "subscribe"
    bus.publish(bus.VERSIONS_CHANNEL, {"workflow": 1, "version": 2})
    message = pubsub.get_message(timeout=5.0)
    pubsub.close()
    assert message is not None and json.loads(message["data"]) == {"workflow": 1, "version": 2}
    expected = bus.VERSIONS_CHANNEL if db == 0 else f"{bus.VERSIONS_CHANNEL}@{db}"
    assert bus.scoped(bus.VERSIONS_CHANNEL) == expected


def test_a_scheduler_ignores_an_announced_version_its_store_does_not_hold() -> None:
    watcher = VersionWatcher()
    watcher.load({"workflow": 1, "version": 2_000_000_000})
    assert watcher.active == {}
