"""Webhooks: inbound triggers (and the signed endpoint they expose), outbound subscriptions
and their delivery log. Signing and delivery live in workflows/integrations/webhooks.py."""

from __future__ import annotations

import time
import uuid
from typing import Annotated, Any

from django.http import HttpRequest, HttpResponse
from ninja import Header, Path, Query, Router, Status

from workflows.api import auth, inputs as i, serializers as s
from workflows.api.auth import ApiRequest, allowed
from workflows.api.pagination import paginate
from workflows.api.parsing import MAX_ID, decode_body
from workflows.api.schema import raw_body, refuses
from workflows.integrations import webhooks
from workflows.runs import actions as runs
from workflows.store.models import Trigger, WebhookDelivery, WebhookSubscription
from workflows.versions import publish as versions

router = Router(tags=["webhooks"])
SlugPath = Annotated[str, Path(pattern=i.SLUG_PATTERN)]
SubscriptionId = Annotated[int, Path(ge=1, le=MAX_ID)]
MANAGE = allowed("manage_webhooks")


@router.get(
    "/workflows/{slug:slug}/triggers", response=s.TriggerList, auth=MANAGE, summary="List inbound triggers"
)
@refuses(404)
def list_triggers(request: HttpRequest, slug: SlugPath) -> Any:
    """List a workflow's inbound triggers (without their secrets)."""
    workflow = versions.get_workflow(slug)
    rows = Trigger.objects.filter(workflow=workflow).select_related("workflow")
    return {"items": [s.trigger(t) for t in rows]}


@router.post(
    "/workflows/{slug:slug}/triggers",
    response={201: s.TriggerCreated},
    auth=MANAGE,
    summary="Create an inbound trigger",
)
@refuses(404)
def create_trigger(request: ApiRequest, response: HttpResponse, slug: SlugPath, body: i.TriggerCreate) -> Any:
    """Create an inbound trigger; its `secret` is in this answer only."""
    trigger = webhooks.create_trigger(
        versions.get_workflow(slug), body.name, actor=request.auth, priority=body.priority
    )
    data = s.trigger(trigger)
    response["Location"] = data["url"]
    return Status(201, {**data, "secret": trigger.secret})


@router.delete(
    "/triggers/{uuid:trigger_id}", response={204: None}, auth=MANAGE, summary="Delete an inbound trigger"
)
@refuses(404)
def delete_trigger(request: ApiRequest, trigger_id: uuid.UUID) -> Any:
    """Delete an inbound trigger; its URL answers 404 from now on."""
    webhooks.delete_trigger(trigger_id, actor=request.auth)
    return Status(204, None)


@router.post(
    "/hooks/{uuid:trigger_id}",
    response={201: s.RunSummary, 200: s.RunSummary},
    summary="Start a run from a signed delivery",
)
@refuses(401, 404, 409, 429)
@raw_body(i.HookInput)
def receive(
    request: HttpRequest,
    response: HttpResponse,
    trigger_id: uuid.UUID,
    timestamp: Annotated[i.HookTimestamp, Header(alias="X-Switchyard-Timestamp")],
    delivery: Annotated[i.HookDelivery, Header(alias="X-Switchyard-Delivery")],
    signature: Annotated[i.HookSignature, Header(alias="X-Switchyard-Signature")],
) -> Any:
    """Start a run from a signed delivery; the JSON body is the run input.

    Authenticated by signature, not by API key: `X-Switchyard-Signature: sha256=<hex>` is the
    HMAC-SHA256, keyed with the trigger's secret, of
    `<X-Switchyard-Timestamp>.<X-Switchyard-Delivery>.<raw body>`.
    A delivery id starts one run: sent again with the same body, the answer is that run (200).
    """
    raw = request.body  # the signature covers these bytes: read them before anything parses them
    # Verify first: a request that is not signed by the trigger's owner must not use up its limit.
    trigger = webhooks.verify_delivery(trigger_id, timestamp, delivery, signature, raw, time.time())
    rate = auth.check_rate(f"trigger:{trigger_id}")
    run_input = decode_body(request, raw)
    run, created = webhooks.start_from_delivery(
        trigger, delivery, run_input, request.headers.get("traceparent")
    )
    data = s.run_summary(runs.get_run(run.pk))
    for name, value in {"Location": data["url"], **(rate.headers() if rate else {})}.items():
        response[name] = value
    if not created:
        response["Idempotent-Replayed"] = "true"
    return Status(201 if created else 200, data)


@router.get(
    "/workflows/{slug:slug}/subscriptions",
    response=s.SubscriptionList,
    auth=MANAGE,
    summary="List webhook subscriptions",
)
@refuses(404)
def list_subscriptions(request: HttpRequest, slug: SlugPath) -> Any:
    """List a workflow's outbound webhook subscriptions (without their secrets)."""
    workflow = versions.get_workflow(slug)
    rows = WebhookSubscription.objects.filter(workflow=workflow).select_related("workflow")
    return {"items": [s.subscription(x) for x in rows]}


@router.post(
    "/workflows/{slug:slug}/subscriptions",
    response={201: s.SubscriptionCreated},
    auth=MANAGE,
    summary="Subscribe to run and dead-letter events",
)
@refuses(404)
def create_subscription(
    request: ApiRequest, response: HttpResponse, slug: SlugPath, body: i.SubscriptionCreate
) -> Any:
    """Subscribe a URL to a workflow's run and dead-letter events; `secret` is in this answer only."""
    workflow = versions.get_workflow(slug)
    sub = webhooks.create_subscription(workflow, body.url, list(body.events), actor=request.auth)
    response["Location"] = f"/api/v1/subscriptions/{sub.pk}"
    return Status(201, {**s.subscription(sub), "secret": sub.secret})


@router.get(
    "/subscriptions/{id:subscription_id}",
    response=s.SubscriptionOut,
    auth=MANAGE,
    summary="Read a webhook subscription",
)
@refuses(404)
def read_subscription(request: HttpRequest, subscription_id: SubscriptionId) -> Any:
    """Read a webhook subscription."""
    return s.subscription(webhooks.get_subscription(subscription_id))


@router.delete(
    "/subscriptions/{id:subscription_id}",
    response={204: None},
    auth=MANAGE,
    summary="Delete a webhook subscription",
)
@refuses(404)
def delete_subscription(request: ApiRequest, subscription_id: SubscriptionId) -> Any:
    """Delete a webhook subscription and its delivery log."""
    webhooks.delete_subscription(subscription_id, actor=request.auth)
    return Status(204, None)


@router.get(
    "/subscriptions/{id:subscription_id}/deliveries",
    response=s.DeliveryPage,
    auth=MANAGE,
    summary="Read the delivery log",
)
@refuses(404)
def list_deliveries(request: HttpRequest, subscription_id: SubscriptionId, q: Query[i.DeliveryQuery]) -> Any:
    """Read a subscription's delivery log, newest first: status, attempts, responses, errors."""
    webhooks.get_subscription(subscription_id)
    rows = WebhookDelivery.objects.filter(subscription_id=subscription_id)
    if q.status:
        rows = rows.filter(status=q.status)
    return paginate(rows, q, "id", s.delivery)
