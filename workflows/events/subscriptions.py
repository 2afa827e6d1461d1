"""Topics and subscriptions: a workflow subscribes to a topic with an optional filter and input
mapping (`core/topics.py` says how they read an event); editors change them, audited.

A topic is made by its first subscription or event (`ensure_topic`): naming one is enough.
A workflow has at most one subscription per topic; subscribing again changes it.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from workflows.core import topics as core
from workflows.core.definition import Issue
from workflows.store import audit
from workflows.store.errors import Invalid, NotFound
from workflows.store.models import Workflow
from workflows.store.topics import Topic, TopicSubscription


def ensure_topic(name: str) -> Topic:
    """The topic `name`, made if new; raise Invalid for a name that is not one."""
    problem = core.topic_problem(name)
    if problem:
        raise Invalid(problem)
    topic, _ = Topic.objects.get_or_create(name=name)
    return topic


def check_subscription(filter_source: str, mapping: Any) -> None:
    issues = [Issue(field, message, "invalid_mapping") for field, message in core.mapping_problems(mapping)]
    problem = core.filter_problem(filter_source)
    if problem:
        issues.insert(0, Issue("filter", problem.removeprefix("filter: "), "invalid_filter"))
    if issues:
        raise Invalid("The subscription is invalid.", issues=issues)


def subscribe(
    workflow: Workflow,
    topic_name: str,
    filter_source: str = "",
    mapping: dict[str, str] | None = None,
    actor: Any = None,
    enabled: bool = True,
) -> TopicSubscription:
    """Subscribe `workflow` to a topic (or change its subscription); return it."""
    check_subscription(filter_source, mapping)
    with transaction.atomic():
        topic = ensure_topic(topic_name)
        sub, created = TopicSubscription.objects.update_or_create(
            workflow=workflow,
            topic=topic,
            defaults={
                "filter": filter_source.strip(),
                "input_mapping": mapping,
                "enabled": enabled,
                "created_by": audit.actor_label(actor),
            },
        )
        action = "topic.subscribed" if created else "topic.subscription_changed"
        audit.record(actor, action, workflow, topic=topic.name, filter=sub.filter, input_mapping=mapping)
    return sub


def get_subscription(subscription_id: int) -> TopicSubscription:
    found = TopicSubscription.objects.select_related("topic", "workflow").filter(pk=subscription_id).first()
    if found is None:
        raise NotFound(f"There is no subscription {subscription_id}.")
    return found


def unsubscribe(workflow: Workflow, topic_name: str, actor: Any = None) -> None:
    """End the workflow's subscription to a topic; raise NotFound if it has none."""
    sub = (
        TopicSubscription.objects.select_related("topic")
        .filter(workflow=workflow, topic__name=topic_name)
        .first()
    )
    if sub is None:
        raise NotFound(f"Workflow {workflow.slug!r} is not subscribed to topic {topic_name!r}.")
    with transaction.atomic():
        sub.delete()
        audit.record(actor, "topic.unsubscribed", workflow, topic=sub.topic.name)


def subscriptions_of(workflow: Workflow) -> list[TopicSubscription]:
    return list(workflow.topic_subscriptions.select_related("topic").order_by("topic__name"))
