"""The only code that talks to the channel layer: topics, their groups, typed messages.

Topics a page can subscribe to:
    overview        counts per workflow, queues, workers alive, executions per second
    workers         workers, schedulers and queues in detail
    workflow:<id>   per-node in-flight counts, recent outcomes and durations
    runs            ids of runs that changed (with their final status when they ended)
    deadletters     dead letters changed (count of open ones)
    approvals       approvals were requested, decided, escalated, expired or cancelled (no
                    names, no counts: each page fetches what its viewer may decide)
    run:<id>        one run's nodes and trace; served from the `runs` group by the consumer
    llm:run:<id>    streamed LLM text of a run's attempts (monitoring/services/livetext.py)
    llm:workflow:<id>  the same, for every run of a workflow (its live page)

The `llm:` topics (live topics) do not travel through the channel layer: they are PUBLISHed
on LIVE_CHANNEL, and each Daphne process hands them to its pages (livefeed.py, with the
figures that decided it).
"""

from __future__ import annotations

import json
import re
from typing import Any, NotRequired, TypedDict

import redis.asyncio as aioredis
from channels.layers import get_channel_layer

from workflows.runtime import bus

# Redis pub/sub channel of the live topics' messages, named per Redis database (bus.scoped):
# pub/sub is server-wide, and two installations on one server must not see each other's text.
LIVE_CHANNEL = "sy:mon:live"
MESSAGE_TYPE = "mon.message"  # handled by MonitorConsumer.mon_message
TOPIC = re.compile(
    r"^(overview|workers|runs|deadletters|approvals|(workflow|run|llm:run|llm:workflow):[1-9][0-9]{0,18})$"
)


class Message(TypedDict):
    topic: str
    epoch: int
    seq: int
    data: dict[str, Any]
    html: NotRequired[dict[str, str]]


def is_topic(topic: str) -> bool:
    return bool(TOPIC.match(topic))


def is_live(topic: str) -> bool:
    """Whether a topic travels on LIVE_CHANNEL instead of the channel layer."""
    return topic.startswith("llm:")


def group_of(topic: str) -> str:
    """Return the Channels group that carries a topic (a run page listens to `runs`)."""
    if topic.startswith("run:"):
        topic = "runs"
    return "mon." + topic.replace(":", ".")


async def publish(messages: list[Message]) -> None:
    """Send each message to its topic's group (one group_send per topic and tick).

    The message travels as the JSON text the browser receives, encoded once here rather
    than once per connection by each consumer.
    """
    layer = get_channel_layer()
    for message in messages:
        envelope = {"type": MESSAGE_TYPE, "topic": message["topic"], "text": json.dumps(message)}
        await layer.group_send(group_of(message["topic"]), envelope)


async def publish_live(client: aioredis.Redis, messages: list[Message]) -> None:
    """PUBLISH live topics' messages together, one line each: `<topic> <JSON text>`.

    One PUBLISH for all (JSON text has no raw line break): at 100 streams one a message was
    2,000 pub/sub messages a second that each Daphne process took one at a time."""
    if not messages:
        return
    assert all(is_live(m["topic"]) for m in messages), [m["topic"] for m in messages]
    await client.publish(
        bus.scoped(LIVE_CHANNEL), "\n".join(f"{m['topic']} {json.dumps(m)}" for m in messages)
    )


async def join(channel_name: str, topics: list[str]) -> None:
    """Add a consumer to its topics' groups (live topics have none: livefeed.py)."""
    layer = get_channel_layer()
    for group in {group_of(t) for t in topics if not is_live(t)}:
        await layer.group_add(group, channel_name)


async def leave(channel_name: str, topics: list[str]) -> None:
    layer = get_channel_layer()
    for group in {group_of(t) for t in topics if not is_live(t)}:
        await layer.group_discard(group, channel_name)
