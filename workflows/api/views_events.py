"""Events: post one on a key (it wakes the wait.event nodes waiting on it, or is kept for
them), or publish CloudEvents to a topic (each starts a run of every subscribed workflow its
filter admits, once per event); list, read and replay the published ones.

`POST /events` reads its body by its form, decided here from the headers:
- a `ce-specversion` header: one CloudEvent in binary HTTP mode (attributes in `ce-` headers,
  the body is its data);
- Content-Type `application/cloudevents+json`, or a JSON object with `specversion`: one
  CloudEvent in structured mode;
- Content-Type `application/cloudevents-batch+json`: a JSON array of CloudEvents;
- otherwise the JSON `{"key", "payload", "source"}` of a wake-up, as before.
A CloudEvent's topic is the `topic` query parameter, else its `topic` extension attribute,
else its `type`. A CloudEvent that lacks required attributes is a 400 naming each of them.
"""

from __future__ import annotations

import time
import uuid
from datetime import datetime
from typing import Annotated, Any

from django.http import HttpRequest, HttpResponse
from ninja import Header, Path, Query, Router, Status
from pydantic import Field, ValidationError
from typing_extensions import TypedDict

from workflows.api import auth, inputs as i, serializers as s
from workflows.api.auth import ApiRequest, allowed
from workflows.api.errors import ApiError, FieldError, from_validation
from workflows.api.pagination import paginate
from workflows.api.parsing import MAX_ID, decode_body
from workflows.api.schema import raw_body, refuses
from workflows.core import cloudevents as ce
from workflows.core.topics import topic_problem
from workflows.events import archive, hooks, publishing
from workflows.store.texts import first_bad_text
from workflows.store.topics import TopicEvent, TopicHook
from workflows.waits import waiting as waits

router = Router(tags=["events"])
EventId = Annotated[int, Path(ge=1, le=MAX_ID)]
TopicPath = Annotated[str, Path(min_length=1, max_length=200)]
MANAGE_HOOKS = allowed("manage_webhooks")

BODY_DOC = {
    "required": True,
    "content": {
        "application/json": {"schema": i.EventIn.model_json_schema()},
        ce.STRUCTURED_TYPE: {"schema": {"type": "object", "required": list(ce.REQUIRED)}},
        ce.BATCH_TYPE: {"schema": {"type": "array", "items": {"type": "object"}}},
        "*/*": {"schema": {}, "description": "binary mode: the data, with ce- headers"},
    },
}


class PublishedOut(TypedDict):
    topic: str
    id: str
    source: str
    event: int
    duplicate: bool
    runs: list[int]


class PublishedBatchOut(TypedDict):
    events: list[PublishedOut]


class KeptEventOut(TypedDict):
    id: int
    topic: str
    event_id: str
    source: str
    type: str
    subject: str
    time: str | None
    datacontenttype: str
    data: Any
    extensions: dict[str, Any]
    received_at: str
    deliveries: list[dict[str, Any]]


class KeptEventPage(TypedDict):
    items: list[KeptEventOut]
    next_cursor: str | None


class KeptEventQuery(i.Page):
    topic: str = Field("", max_length=200)
    type: str = Field("", max_length=200)
    source: str = Field("", max_length=500)
    q: str = Field("", max_length=200, description="Text in the event's id, subject or type.")


class EventReplayIn(i.Body):
    subscription: int = Field(ge=1, le=MAX_ID, description="The subscription to deliver the event to.")


class ReplayOut(TypedDict):
    run: int


@router.post(
    "/events",
    response={202: s.PostedEventOut | PublishedOut | PublishedBatchOut},
    auth=allowed("post_event"),
    summary="Post an event (a key's wake-up, or CloudEvents to a topic)",
    openapi_extra={"requestBody": BODY_DOC},
)
def post_event(request: ApiRequest) -> Any:
    """Post an event. On a key: every node waiting on it wakes with the payload as its output
    (only the oldest of `first_only` ones); nobody waiting: it is kept for the retention time.
    CloudEvents (structured, batch or binary mode) are published to a topic: each starts one
    run per subscribed workflow whose filter admits it, once per (source, id)."""
    content_type = request.headers.get("Content-Type", "")
    if "ce-specversion" in request.headers:
        return published_one(
            request, read(lambda: ce.from_binary(request.headers, request.body, content_type))
        )
    body = decode_body(request, request.body) if request.body.strip() else None
    if ce.is_batch(content_type):
        events = read(lambda: ce.from_batch(body))
        results = publish(request, events)
        return Status(202, {"events": [published_out(r) for r in results]})
    if ce.is_structured(content_type) or (isinstance(body, dict) and "specversion" in body):
        return published_one(request, read(lambda: ce.from_structured(body)))
    return post_on_key(request, body)


def post_on_key(request: ApiRequest, body: Any) -> Any:
    try:
        event = i.EventIn.model_validate({} if body is None else body)
    except ValidationError as exc:
        raise from_validation([{**e, "loc": ("body", "body", *e["loc"])} for e in exc.errors()], {}) from None
    posted = waits.post_event(event.key, event.payload, event.source, actor=request.auth)
    data = {
        "id": posted.event_id,
        "key": posted.key,
        "woken_runs": posted.woken_runs,
        "retained": posted.retained,
    }
    return Status(202, data)


def read(parse: Any) -> Any:
    """Run a CloudEvents reader; its refusal is a 400 naming each missing attribute."""
    try:
        found = parse()
    except ce.BadEvent as exc:
        fields = [
            FieldError("body", f"{exc.where}.{m}" if exc.where else m, "is required") for m in exc.missing
        ]
        raise ApiError(400, exc.message, fields or [FieldError("body", exc.where, exc.message)]) from None
    for event in found if isinstance(found, list) else [found]:
        if first_bad_text(event.data) is not None:
            raise ApiError(422, "data must not contain NUL characters or unpaired surrogates.")
    return found


def topic_of(request: HttpRequest, event: ce.CloudEvent) -> str:
    name = request.GET.get("topic") or str(event.extensions.get("topic") or "") or event.type
    problem = topic_problem(name)
    if problem:
        raise ApiError(400, problem, [FieldError("query", "topic", problem)])
    return name


def publish(request: ApiRequest, events: list[ce.CloudEvent]) -> list[publishing.Published]:
    pairs = [(topic_of(request, e), e) for e in events]
    return publishing.publish_events(
        pairs, actor=request.auth, traceparent=request.headers.get("traceparent")
    )


def published_one(request: ApiRequest, event: ce.CloudEvent) -> Any:
    (result,) = publish(request, [event])
    return Status(202, published_out(result))


def published_out(result: publishing.Published) -> PublishedOut:
    return {
        "topic": result.topic,
        "id": result.event.id,
        "source": result.event.source,
        "event": result.row_id,
        "duplicate": result.duplicate,
        "runs": result.runs,
    }


def kept_event(row: TopicEvent) -> KeptEventOut:
    return {
        "id": row.pk,
        "topic": row.topic.name,
        "event_id": row.event_id,
        "source": row.source,
        "type": row.type,
        "subject": row.subject,
        "time": row.time.isoformat() if row.time else None,
        "datacontenttype": row.datacontenttype,
        "data": row.data,
        "extensions": row.extensions,
        "received_at": row.received_at.isoformat(),
        "deliveries": row.deliveries,
    }


@router.get("/events", response=KeptEventPage, auth=allowed("view"), summary="List published events")
def list_events(request: HttpRequest, q: Query[KeptEventQuery]) -> Any:
    """List the events published to topics, newest first; filter by topic, type, source or text."""
    found = archive.EventSearch(topic=q.topic, type=q.type, source=q.source, q=q.q)
    return paginate(archive.search(found), q, "id", kept_event)


@router.get(
    "/events/{id:event_id}", response=KeptEventOut, auth=allowed("view"), summary="Read a published event"
)
@refuses(404)
def read_event(request: HttpRequest, event_id: EventId) -> Any:
    """Read a published event: its attributes, data, and the runs it started (deliveries)."""
    return kept_event(archive.get_event(event_id))


@router.post(
    "/events/{id:event_id}/replay",
    response={201: ReplayOut},
    auth=allowed("replay"),
    summary="Replay a published event to a subscription",
)
@refuses(404)
def replay_event(request: ApiRequest, response: HttpResponse, event_id: EventId, body: EventReplayIn) -> Any:
    """Deliver a kept event to one of its topic's subscriptions again: a new run (its Location),
    the subscription's filter not consulted."""
    run_id = publishing.replay(event_id, body.subscription, actor=request.auth)
    response["Location"] = f"/api/v1/runs/{run_id}"
    return Status(201, {"run": run_id})


# --------------------------------------------------------------------------- signed hooks into topics


class TopicHookIn(i.Body):
    name: str = Field(min_length=1, max_length=100)
    event_type: str = Field(
        "",
        max_length=200,
        description="The CloudEvents type of what it publishes; default: the topic's name.",
    )


class TopicHookOut(TypedDict):
    id: str
    topic: str
    name: str
    event_type: str
    url: str
    created_at: datetime


class TopicHookCreated(TopicHookOut):
    secret: str


class TopicHookList(TypedDict):
    items: list[TopicHookOut]


def topic_hook(hook: TopicHook) -> TopicHookOut:
    return {
        "id": str(hook.pk),
        "topic": hook.topic.name,
        "name": hook.name,
        "event_type": hook.event_type,
        "url": f"{s.API}/topic-hooks/{hook.pk}",
        "created_at": hook.created_at,
    }


@router.get(
    "/topics/{name}/hooks", response=TopicHookList, auth=MANAGE_HOOKS, summary="List a topic's signed hooks"
)
def list_topic_hooks(request: HttpRequest, name: TopicPath) -> Any:
    """List the signed hooks into a topic (without their secrets)."""
    return {"items": [topic_hook(h) for h in hooks.hooks_of(name)]}


@router.post(
    "/topics/{name}/hooks",
    response={201: TopicHookCreated},
    auth=MANAGE_HOOKS,
    summary="Create a signed hook into a topic",
)
def create_topic_hook(request: ApiRequest, response: HttpResponse, name: TopicPath, body: TopicHookIn) -> Any:
    """Create a signed hook into a topic (made if new); its `secret` is in this answer only."""
    hook = hooks.create_hook(name, body.name, body.event_type, actor=request.auth)
    data = topic_hook(hook)
    response["Location"] = data["url"]
    return Status(201, {**data, "secret": hook.secret})


@router.delete(
    "/topic-hooks/{uuid:hook_id}", response={204: None}, auth=MANAGE_HOOKS, summary="Delete a topic hook"
)
@refuses(404)
def delete_topic_hook(request: ApiRequest, hook_id: uuid.UUID) -> Any:
    """Delete a signed hook into a topic; its URL answers 404 from now on."""
    hooks.delete_hook(hook_id, actor=request.auth)
    return Status(204, None)


@router.post(
    "/topic-hooks/{uuid:hook_id}",
    response={202: PublishedOut},
    summary="Publish a signed delivery to a topic",
)
@refuses(401, 404, 429)
@raw_body(i.HookInput)
def receive_topic_hook(
    request: HttpRequest,
    response: HttpResponse,
    hook_id: uuid.UUID,
    timestamp: Annotated[i.HookTimestamp, Header(alias="X-Switchyard-Timestamp")],
    delivery: Annotated[i.HookDelivery, Header(alias="X-Switchyard-Delivery")],
    signature: Annotated[i.HookSignature, Header(alias="X-Switchyard-Signature")],
) -> Any:
    """Publish a signed delivery's JSON body to the hook's topic, as a CloudEvent whose id is
    the delivery id: it starts one run per subscribed workflow its filter admits; sent again,
    it is the same event (`duplicate`) and starts nothing.

    Authenticated by signature, not by API key, as a trigger's deliveries
    (`X-Switchyard-Signature: sha256=<hex>`, the HMAC-SHA256 keyed with the hook's secret of
    `<X-Switchyard-Timestamp>.<X-Switchyard-Delivery>.<raw body>`).
    """
    raw = request.body  # the signature covers these bytes: read them before anything parses them
    # Verify first: a request that is not signed by the hook's owner must not use up its limit.
    hook = hooks.verify(hook_id, timestamp, delivery, signature, raw, time.time())
    rate = auth.check_rate(f"topic-hook:{hook_id}")
    result = hooks.publish(hook, delivery, decode_body(request, raw), request.headers.get("traceparent"))
    for header_name, value in (rate.headers() if rate else {}).items():
        response[header_name] = value
    return Status(202, published_out(result))
