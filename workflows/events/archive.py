"""The kept events: search them, read one with the runs it started, delete them with age.

Events are retained as runs are: those received more than SWITCHYARD["RETENTION_DAYS"] ago
are deleted (0 keeps them for ever), in batches, by the schedulers' retention duty
(`operations/retention.prune_and_report` calls `prune_events`). An event outlives the runs it
started only by the difference in their ages; its deliveries keep the run ids.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q, QuerySet

from workflows.store.errors import NotFound
from workflows.store.topics import TopicEvent, TopicSubscription

EVENTS = TopicEvent._meta.db_table
BATCH = 1000
MAX_BATCHES = 10

EXPIRED_SQL = f"""
DELETE FROM {EVENTS} WHERE id IN (
  SELECT id FROM {EVENTS} WHERE received_at < now() - %(days)s * interval '1 day'
  ORDER BY received_at LIMIT %(limit)s)
"""


@dataclass(frozen=True)
class EventSearch:
    """What the events page and `GET /events` filter on; empty fields match everything."""

    topic: str = ""
    type: str = ""
    source: str = ""
    q: str = ""  # in the id, the subject or the type

    def apply(self, events: QuerySet[TopicEvent]) -> QuerySet[TopicEvent]:
        if self.topic:
            events = events.filter(topic__name=self.topic)
        if self.type:
            events = events.filter(type=self.type)
        if self.source:
            events = events.filter(source=self.source)
        if self.q:
            events = events.filter(
                Q(event_id__icontains=self.q) | Q(subject__icontains=self.q) | Q(type__icontains=self.q)
            )
        return events


def search(found: EventSearch) -> QuerySet[TopicEvent]:
    """The kept events a search matches, newest first."""
    return found.apply(TopicEvent.objects.select_related("topic")).order_by("-id")


def get_event(event_id: int) -> TopicEvent:
    row = TopicEvent.objects.select_related("topic").filter(pk=event_id).first()
    if row is None:
        raise NotFound(f"There is no event {event_id}.")
    return row


def subscriptions_for(row: TopicEvent) -> list[TopicSubscription]:
    """The subscriptions an event may be replayed to (its topic's)."""
    return list(TopicSubscription.objects.filter(topic_id=row.topic_id).select_related("workflow"))


def prune_events(batches: int = MAX_BATCHES) -> int:
    """Delete events past the retention age, up to `batches` batches; return how many went."""
    days = float(settings.SWITCHYARD["RETENTION_DAYS"])
    if days <= 0:
        return 0
    pruned = 0
    for _ in range(batches):
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute(EXPIRED_SQL, {"days": days, "limit": BATCH})
            count = cur.rowcount
        pruned += count
        if count < BATCH:
            break
    return pruned
