"""Signed hooks into topics: a sender with a hook's secret posts JSON to
/api/v1/topic-hooks/<id>; the body is published to the hook's topic as a CloudEvent and so
starts the runs of every subscribed workflow whose filter admits it, as `POST /events` would.

The delivery is signed as a trigger's is (integrations/webhooks.check_signature: HMAC-SHA256
of timestamp, delivery id and raw body, with the same tolerance); the event's id is the
delivery id and its source the hook (`/topic-hooks/<id>`), so a delivery sent again is the
same event, kept once, starting nothing new. Admins make and delete hooks (audited); the
secret is shown once, at creation.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.utils import timezone

from workflows.core.cloudevents import CloudEvent
from workflows.core.topics import topic_problem
from workflows.events import publishing
from workflows.events.subscriptions import ensure_topic
from workflows.integrations import webhooks
from workflows.store import audit
from workflows.store.errors import Invalid, NotFound
from workflows.store.topics import TopicHook
from workflows.versions.catalog import person_of


def create_hook(topic_name: str, name: str, event_type: str = "", actor: Any = None) -> TopicHook:
    """A hook into `topic_name` (made if new) publishing events of `event_type` (default: the topic's name)."""
    problem = topic_problem(topic_name)
    if problem:
        raise Invalid(f"topic: {problem}")
    name = name.strip()
    if not 1 <= len(name) <= 100:
        raise Invalid("name: give the hook a name of 1 to 100 characters.")
    event_type = event_type.strip() or topic_name
    if len(event_type) > 200:
        raise Invalid("event_type: at most 200 characters.")
    with transaction.atomic():
        hook = TopicHook.objects.create(
            topic=ensure_topic(topic_name),
            name=name,
            event_type=event_type,
            secret=webhooks.new_secret(),
            created_by=person_of(actor),
        )
        audit.record(actor, "topic_hook.create", hook, topic=topic_name, name=name, event_type=event_type)
    return hook


def get_hook(hook_id: Any) -> TopicHook:
    try:
        return TopicHook.objects.select_related("topic").get(pk=uuid.UUID(str(hook_id)))
    except (TopicHook.DoesNotExist, ValueError):
        raise NotFound(f"No topic hook with id {hook_id}.") from None


def delete_hook(hook_id: Any, actor: Any = None) -> None:
    with transaction.atomic():
        hook = get_hook(hook_id)
        audit.record(actor, "topic_hook.delete", hook, topic=hook.topic.name, name=hook.name)
        hook.delete()


def hooks_of(topic_name: str | None = None) -> list[TopicHook]:
    rows = TopicHook.objects.select_related("topic").order_by("topic__name", "created_at")
    return list(rows.filter(topic__name=topic_name) if topic_name else rows)


def verify(
    hook_id: Any, timestamp: str, delivery_id: str, signature: str, body: bytes, now: float
) -> TopicHook:
    """Return the hook if the delivery is signed with its secret and fresh; raise otherwise."""
    hook = get_hook(hook_id)
    webhooks.check_signature(hook.secret, timestamp, delivery_id, signature, body, now, "topic hook")
    return hook


def publish(
    hook: TopicHook, delivery_id: str, data: Any, traceparent: str | None = None
) -> publishing.Published:
    """Publish a verified delivery's data to the hook's topic, once per delivery id."""
    event = CloudEvent(
        id=delivery_id,
        source=f"/topic-hooks/{hook.pk}",
        type=hook.event_type,
        time=timezone.now(),
        datacontenttype="application/json",
        data=data,
    )
    (result,) = publishing.publish_events([(hook.topic.name, event)], traceparent=traceparent)
    return result
