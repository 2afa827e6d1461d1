"""Websocket consumer of the dashboard: one connection per page, several topics.

Connecting needs a logged-in user with the viewer role. Before every message sent the role
(and the session) are checked again, against a decision at most MONITOR["RECHECK_SECONDS"]
old (1 s by default; 0 checks the database every time) shared by the user's connections in
this process: a user deactivated, demoted or logged out stops receiving within that time and
is disconnected, and fifty open dashboards cost one check a second per user, not two
hundred (measured: a database check per send made Daphne the bottleneck, bench/). Connecting
uses the same shared decision: fifty tabs reconnecting at once after a restart made fifty
checks in a row (over a second here, every send of every dashboard waiting behind them).

Snapshot topics are forwarded as the broadcaster sent them (epoch and sequence number
included: the page re-syncs on a gap); a `run:<id>` topic is served from the `runs` change
list: when the run changed, or a change message was missed, the consumer reads the run and
sends its fragments, rendered by the page's templates. Streamed LLM text (`llm:` topics)
comes past the channel layer, through this process's one subscriber (services/livefeed.py),
into a queue per page that `forward_live` sends from in order, with the same check before
every send.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.base import SessionBase

from controlplane import access
from monitoring.services import events, livefeed, runstate
from workflows.store.models import Run

MAX_TOPICS = 6
CLOSE_FORBIDDEN = 4403
CLOSE_BAD_REQUEST = 4400


def topics_of(scope: dict[str, Any]) -> list[str] | None:
    """Return the topics named in the query string (?topics=a,b), or None if any is invalid."""
    query = parse_qs(scope.get("query_string", b"").decode())
    topics = [t for value in query.get("topics", []) for t in value.split(",") if t]
    if not topics or len(topics) > MAX_TOPICS or not all(events.is_topic(t) for t in topics):
        return None
    return list(dict.fromkeys(topics))


def allowed_user_now(user_id: int | None, session: SessionBase | None) -> Any:
    """Return the user, fresh from the database, if still logged in and allowed to view."""
    if user_id is None or session is None or not session.session_key:
        return None
    if not session.exists(session.session_key):
        return None  # logged out (or the session expired and was cleared)
    user = get_user_model().objects.filter(pk=user_id).first()
    return user if access.can(user, "view") else None


allowed_user = database_sync_to_async(allowed_user_now)

# (user id, session key) -> (monotonic time of the check, the check's future). A user's
# connections in this process share one decision for RECHECK_SECONDS, and a check that is
# under way is awaited by all of them instead of being repeated.
_decisions: dict[tuple[int | None, str | None], tuple[float, asyncio.Future[Any]]] = {}
MAX_DECISIONS = 10_000


async def checked_user(user_id: int | None, session: SessionBase | None) -> tuple[Any, float]:
    """Return the user if still allowed to view (else None), from a decision at most
    RECHECK_SECONDS old, and the monotonic time until which that decision holds."""
    key = (user_id, session.session_key if session is not None else None)
    now = time.monotonic()
    recheck = settings.MONITOR["RECHECK_SECONDS"]
    cached = _decisions.get(key)
    if cached is None or now - cached[0] >= recheck:
        if len(_decisions) > MAX_DECISIONS:
            _decisions.clear()
        cached = (now, asyncio.ensure_future(allowed_user(user_id, session)))
        _decisions[key] = cached
    return await asyncio.shield(cached[1]), cached[0] + recheck


@database_sync_to_async
def run_message(run_id: int, user: Any, after_span: int) -> tuple[dict[str, str], dict[str, Any]] | None:
    run = Run.objects.select_related("workflow", "version").filter(pk=run_id).first()
    if run is None:
        return None
    ctx = runstate.load(run, user, after_span)
    return runstate.render(ctx), runstate.live_data(ctx)


class MonitorConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        self.topics = topics_of(self.scope) or []
        self.joined = False
        user = self.scope.get("user")
        self.user, self.allowed_until = await checked_user(
            getattr(user, "pk", None), self.scope.get("session")
        )
        if self.user is None:
            await self.close(code=CLOSE_FORBIDDEN)
            return
        if not self.topics:
            await self.close(code=CLOSE_BAD_REQUEST)
            return
        self.epoch = uuid.uuid4().int % 2**53  # run topics are numbered per connection
        self.seq: dict[str, int] = {}
        self.after_span: dict[str, int] = {}
        self.runs_seq: tuple[int, int] | None = None
        await events.join(self.channel_name, self.topics)
        self.joined = True
        await self.accept()
        if self.live_topics:
            self.live: asyncio.Queue[str] = asyncio.Queue(livefeed.QUEUE_AT_MOST)
            livefeed.hub.follow(self.live_topics, self.live)
            self.forwarding = asyncio.ensure_future(self.forward_live())
        for topic in self.run_topics:
            await self.send_run(topic)

    async def disconnect(self, code: int) -> None:
        if self.joined:
            await events.leave(self.channel_name, self.topics)
        if self.joined and self.live_topics:
            livefeed.hub.leave(self.live_topics, self.live)
            self.forwarding.cancel()

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Pages only listen; anything they send is ignored."""

    @property
    def live_topics(self) -> list[str]:
        return [t for t in self.topics if events.is_live(t)]

    async def forward_live(self) -> None:
        """Send the live topics' messages as they come, in order; stop when not allowed."""
        while True:
            text = await self.live.get()
            if not await self.still_allowed():
                return
            await self.send(text_data=text)

    @property
    def run_topics(self) -> list[str]:
        return [t for t in self.topics if t.startswith("run:")]

    async def still_allowed(self) -> bool:
        """Check the role again before a send once the last decision has expired; disconnect
        if it is gone. Within a decision's time a send asks nothing (it looked the shared
        decision up and awaited it before every token; bench/llm_stream_bench.py at 200
        streams: Daphne's CPU per token 2 % less, within that bench's noise)."""
        if time.monotonic() < self.allowed_until:
            return True
        self.user, self.allowed_until = await checked_user(
            self.user.pk if self.user else None, self.scope.get("session")
        )
        if self.user is None:
            await self.close(code=CLOSE_FORBIDDEN)
            return False
        return True

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Handle broadcasts without Channels' per-message database clean-up.

        Channels closes stale database connections before every message, through a hop to
        the one thread all sync code shares: with fifty dashboards open that was 600 hops a
        second and a third of Daphne's time (py-spy, bench/dashboard_bench.py). A broadcast
        touches the database only through `database_sync_to_async`, which does the same
        clean-up around each call itself.
        """
        if message["type"] == events.MESSAGE_TYPE:
            await self.mon_message(message)
        else:
            await super().dispatch(message)

    async def mon_message(self, event: dict[str, Any]) -> None:
        if not await self.still_allowed():
            return
        topic = event["topic"]
        if topic == "runs" and self.run_topics:
            await self.follow_runs(json.loads(event["text"]))
        if topic in self.topics:
            await self.send(text_data=event["text"])

    async def follow_runs(self, event: dict[str, Any]) -> None:
        """Refresh each watched run that changed, or all of them after a missed message."""
        stamp = (event["epoch"], event["seq"])
        missed = self.runs_seq is not None and stamp != (self.runs_seq[0], self.runs_seq[1] + 1)
        self.runs_seq = stamp
        changed = event["data"]["runs"]
        for topic in self.run_topics:
            if missed or event["data"]["overflow"] or topic.split(":")[1] in changed:
                await self.send_run(topic)

    async def send_run(self, topic: str) -> None:
        after = self.after_span.get(topic, 0)
        found = await run_message(int(topic.split(":")[1]), self.user, after)
        if found is None:
            return
        html, data = found
        data["reset"] = after == 0
        if data["spans"]:
            self.after_span[topic] = data["spans"][-1]["id"]
        self.seq[topic] = self.seq.get(topic, 0) + 1
        await self.send_json(
            {"topic": topic, "epoch": self.epoch, "seq": self.seq[topic], "data": data, "html": html}
        )
