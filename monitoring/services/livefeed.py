"""Streamed LLM text to this process's pages past the channel layer: one subscriber a process.

channels-redis hands a Daphne process its consumers' messages off one Redis list, one at a
time, with several round trips each: at 100 streams (a run page each, 2 shared cores) the run
pages saw a token after 5.6 s at the median and 9.6 s at p95 while Daphne used 18 % of a core
(docs/benchmarks.md, "LLM streams"): the round trips, not the CPU, were the limit, and they
grow with every page. With this path (and broadcaster.stream_texts) the run pages saw
353 ms p50 and 721 ms p95 at 100 streams, within 40 ms at the median of SSE in the same run
(the machine's load about 9; figures for 200 streams and what remains: docs/benchmarks.md,
"Tokens on screen"). Instead of the channel layer, the broadcaster PUBLISHes the `llm:` messages of each read of
the feed together on events.LIVE_CHANNEL (one pub/sub message, a line per page message), each Daphne process subscribes to it
once, when its first page follows an `llm:` topic, and puts every message into the queues of
its pages that follow the message's topic; each page's consumer sends them in order, checking
permission again before each send (MonitorConsumer.forward_live).

It subscribes once, in the task that reads, and never again while connected: channels-redis's
own pub/sub layer subscribed per group on the connection its reader was reading, which under
redis-py 8 raced ("Timeout reading from", controlplane/settings.py). Pub/sub delivers at most
once: a message lost (Redis away, a page's full queue) is a gap the page sees in the sequence
numbers, and the next whole text (livetext.WHOLE_EVERY_SECONDS) mends it.
"""

from __future__ import annotations

import asyncio
import logging

import redis.asyncio as aioredis
from django.conf import settings

from monitoring.services import events
from workflows.runtime import bus
from workflows.runtime.outages import STORES_AWAY, Outage

log = logging.getLogger(__name__)

QUEUE_AT_MOST = 500  # messages waiting for one page; more and the page misses some (a gap)
POLL_SECONDS = 1.0  # a read waits this long, then redis-py may ping (its health check)


class Hub:
    """This process's subscription to the live channel and the queues of the pages following."""

    def __init__(self) -> None:
        self.queues: dict[str, set[asyncio.Queue[str]]] = {}
        self.task: asyncio.Future[None] | None = None

    def follow(self, topics: list[str], queue: asyncio.Queue[str]) -> None:
        for topic in topics:
            self.queues.setdefault(topic, set()).add(queue)
        if self.task is None or self.task.done():
            self.task = asyncio.ensure_future(self.read_forever())

    def leave(self, topics: list[str], queue: asyncio.Queue[str]) -> None:
        for topic in topics:
            following = self.queues.get(topic, set())
            following.discard(queue)
            if not following:
                self.queues.pop(topic, None)

    async def read_forever(self) -> None:
        """Subscribe, hand out what comes; after a lost connection, subscribe again."""
        outage = Outage("the pages' live text", log)
        while True:
            client = aioredis.Redis.from_url(
                settings.REDIS_URL, decode_responses=True, health_check_interval=30
            )
            pubsub = client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(bus.scoped(events.LIVE_CHANNEL))
                outage.ok()
                while True:
                    message = await pubsub.get_message(timeout=POLL_SECONDS)
                    if message is not None:
                        self.hand_out(message["data"])
            except (OSError, *STORES_AWAY) as exc:
                await asyncio.sleep(outage.failed(exc))
            finally:
                await pubsub.aclose()  # type: ignore[no-untyped-call]  # redis-py leaves PubSub.aclose unannotated
                await client.aclose()

    def hand_out(self, payload: str) -> None:
        """Put each line's message (`<topic> <JSON text>`) into its topic's pages' queues."""
        for line in payload.split("\n"):
            topic, _, text = line.partition(" ")
            for queue in self.queues.get(topic, ()):
                if not queue.full():
                    queue.put_nowait(text)


hub = Hub()  # one a process: Daphne's event loop
