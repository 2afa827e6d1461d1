"""Topics, the workflows subscribed to them, and every event published to them (workflows/events).

An event is kept whole (its CloudEvents attributes, extensions and data) with what it set off
(`deliveries`: per subscription, the run it started, or why none), unique per topic on
(source, id), which is what makes publishing idempotent: the same event posted again finds
its row and starts nothing. Events are deleted with the runs' retention age
(workflows/events/archive.py).
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class Topic(models.Model):
    """A named stream of events (`orders.created`); made by the first subscription or event."""

    name = models.CharField(max_length=200, unique=True)
    description = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "workflows"
        ordering = ["name"]

    def __str__(self) -> str:
        return f"topic {self.name}"


class TopicSubscription(models.Model):
    """A workflow started by a topic's events: those its `filter` (a condition) admits, with
    the run input its `input_mapping` computes (None: the event's data)."""

    workflow = models.ForeignKey(
        "workflows.Workflow", on_delete=models.CASCADE, related_name="topic_subscriptions"
    )
    topic = models.ForeignKey(Topic, on_delete=models.CASCADE, related_name="subscriptions")
    filter = models.TextField(blank=True)
    input_mapping = models.JSONField(null=True, blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=200, blank=True)

    class Meta:
        app_label = "workflows"
        ordering = ["topic__name", "workflow__slug"]
        constraints = [models.UniqueConstraint(fields=["workflow", "topic"], name="subscription_unique")]

    def __str__(self) -> str:
        return f"{self.workflow_id} on {self.topic_id}"


class TopicEvent(models.Model):
    """One event published to a topic, kept as it came and with what it started."""

    topic = models.ForeignKey(Topic, on_delete=models.CASCADE, related_name="events")
    event_id = models.CharField(max_length=200)
    source = models.CharField(max_length=500)
    type = models.CharField(max_length=200)
    subject = models.CharField(max_length=500, blank=True)
    time = models.DateTimeField(null=True, blank=True)
    datacontenttype = models.CharField(max_length=200, blank=True)
    data = models.JSONField(null=True, blank=True)
    extensions = models.JSONField(default=dict, blank=True)
    received_at = models.DateTimeField(auto_now_add=True)
    # [{"subscription": id, "workflow": slug, "run": id | None, "outcome": started|filtered|refused, "error": ...}]
    deliveries = models.JSONField(default=list, blank=True)

    class Meta:
        app_label = "workflows"
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=["topic", "source", "event_id"], name="topic_event_unique")
        ]
        indexes = [
            models.Index(fields=["received_at"], name="topic_event_received_idx"),
            models.Index(fields=["topic", "-id"], name="topic_event_topic_idx"),
        ]

    def __str__(self) -> str:
        return f"event {self.event_id} on {self.topic_id}"


class TopicHook(models.Model):
    """A signed inbound hook into a topic: a POST to /api/v1/topic-hooks/<id>, signed with its
    secret as a trigger's deliveries are, publishes its JSON body as a CloudEvent (the
    delivery id is the event's id, so a delivery sent again is the same event)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    topic = models.ForeignKey(Topic, on_delete=models.CASCADE, related_name="hooks")
    name = models.CharField(max_length=100)
    event_type = models.CharField(max_length=200)  # the CloudEvents `type` of what it publishes
    # HMAC key: kept in clear because verifying a signature needs it; shown once at creation.
    secret = models.CharField(max_length=100)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "workflows"
        ordering = ["topic", "created_at"]

    def __str__(self) -> str:
        return f"hook {self.name} into {self.topic_id}"
