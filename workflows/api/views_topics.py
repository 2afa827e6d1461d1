"""Topics and subscriptions: list topics; subscribe a workflow to a topic (filter, input
mapping), change or end it. Editors change subscriptions; anyone with a role reads them."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from django.db.models import Count
from django.http import HttpRequest
from ninja import Path, Router, Status
from pydantic import Field
from typing_extensions import TypedDict

from workflows.api import inputs as i
from workflows.api.auth import ApiRequest, allowed
from workflows.api.schema import refuses
from workflows.core.topics import TOPIC_PATTERN
from workflows.events import subscriptions
from workflows.store.topics import Topic, TopicSubscription
from workflows.versions import publish as versions

router = Router(tags=["events"])
SlugPath = Annotated[str, Path(pattern=i.SLUG_PATTERN)]
TopicPath = Annotated[str, Path(pattern=TOPIC_PATTERN)]


class SubscriptionIn(i.Body):
    filter: str = Field(
        "", max_length=500, description="A condition over the event (`input`) and its data (`output`)."
    )
    input_mapping: dict[str, Any] | None = Field(
        None, description="Run input key -> expression over the event; none: the event's data is the input."
    )
    enabled: bool = True


class TopicSubscriptionOut(TypedDict):
    id: int
    workflow: str
    topic: str
    filter: str
    input_mapping: dict[str, Any] | None
    enabled: bool
    created_at: datetime
    created_by: str


class TopicOut(TypedDict):
    name: str
    subscriptions: int
    events: int


def subscription_out(sub: TopicSubscription) -> TopicSubscriptionOut:
    return {
        "id": sub.pk,
        "workflow": sub.workflow.slug,
        "topic": sub.topic.name,
        "filter": sub.filter,
        "input_mapping": sub.input_mapping,
        "enabled": sub.enabled,
        "created_at": sub.created_at,
        "created_by": sub.created_by,
    }


@router.get("/topics", response=list[TopicOut], auth=allowed("view"), summary="List topics")
def list_topics(request: HttpRequest) -> Any:
    """List the topics with how many subscriptions and kept events each has."""
    rows = Topic.objects.annotate(
        subs=Count("subscriptions", distinct=True), kept=Count("events", distinct=True)
    )
    return [{"name": t.name, "subscriptions": t.subs, "events": t.kept} for t in rows]


@router.get(
    "/workflows/{slug}/topics",
    response=list[TopicSubscriptionOut],
    auth=allowed("view"),
    summary="List a workflow's topic subscriptions",
)
@refuses(404)
def list_topic_subscriptions(request: HttpRequest, slug: SlugPath) -> Any:
    """List the topics a workflow is subscribed to, with their filters and input mappings."""
    return [subscription_out(sub) for sub in subscriptions.subscriptions_of(versions.get_workflow(slug))]


@router.put(
    "/workflows/{slug}/topics/{topic}",
    response={200: TopicSubscriptionOut},
    auth=allowed("manage_subscriptions"),
    summary="Subscribe a workflow to a topic",
)
@refuses(404)
def subscribe_to_topic(request: ApiRequest, slug: SlugPath, topic: TopicPath, body: SubscriptionIn) -> Any:
    """Subscribe the workflow to the topic (made if new), or change its subscription."""
    sub = subscriptions.subscribe(
        versions.get_workflow(slug), topic, body.filter, body.input_mapping, request.auth, body.enabled
    )
    return Status(200, subscription_out(sub))


@router.delete(
    "/workflows/{slug}/topics/{topic}",
    response={204: None},
    auth=allowed("manage_subscriptions"),
    summary="End a topic subscription",
)
@refuses(404)
def unsubscribe_from_topic(request: ApiRequest, slug: SlugPath, topic: TopicPath) -> Any:
    """End the workflow's subscription: the topic's later events no longer start it."""
    subscriptions.unsubscribe(versions.get_workflow(slug), topic, request.auth)
    return Status(204, None)
