"""Webhooks: inbound triggers (and the signed endpoint they expose), outbound subscriptions
and their delivery log. Signing and delivery live in workflows/webhooks.py."""

from __future__ import annotations

import time
import uuid

from django.http import HttpResponse

from workflows import runs, versions, webhooks
from workflows.api import auth
from workflows.api import serializers as s
from workflows.api.pagination import paginate
from workflows.api.routing import Call, decode_body, no_content, render
from workflows.models import Trigger, WebhookDelivery, WebhookSubscription

TIMESTAMP, DELIVERY, SIGNATURE = "X-Switchyard-Timestamp", "X-Switchyard-Delivery", "X-Switchyard-Signature"


def list_triggers(call: Call, slug: str) -> HttpResponse:
    """List a workflow's inbound triggers (without their secrets)."""
    workflow = versions.get_workflow(slug)
    rows = Trigger.objects.filter(workflow=workflow).select_related("workflow")
    return render({"items": [s.trigger(t) for t in rows]})


def create_trigger(call: Call, slug: str) -> HttpResponse:
    """Create an inbound trigger; its `secret` is in this answer only."""
    trigger = webhooks.create_trigger(versions.get_workflow(slug), call.body.name, actor=call.key)
    data = s.trigger(trigger)
    return render({**data, "secret": trigger.secret}, 201, {"Location": data["url"]})


def delete_trigger(call: Call, trigger_id: uuid.UUID) -> HttpResponse:
    """Delete an inbound trigger; its URL answers 404 from now on."""
    webhooks.delete_trigger(trigger_id, actor=call.key)
    return no_content()


def receive(call: Call, trigger_id: uuid.UUID) -> HttpResponse:
    """Start a run from a signed delivery; the JSON body is the run input.

    Authenticated by signature, not by API key: `X-Switchyard-Signature: sha256=<hex>` is the
    HMAC-SHA256, keyed with the trigger's secret, of `<X-Switchyard-Timestamp>.<raw body>`.
    A delivery id starts one run: sent again with the same body, the answer is that run (200).
    """
    rate = auth.check_rate(f"trigger:{trigger_id}")
    h = call.headers
    trigger = webhooks.verify_delivery(trigger_id, h[TIMESTAMP], h[SIGNATURE], call.raw, time.time())
    run_input = decode_body(call.request, call.raw)
    run, created = webhooks.start_from_delivery(trigger, h[DELIVERY], run_input)
    data = s.run_summary(runs.get_run(run.pk))
    headers = {"Location": data["url"], **(rate.headers() if rate else {})}
    if not created:
        headers["Idempotent-Replayed"] = "true"
    return render(data, 201 if created else 200, headers)


def list_subscriptions(call: Call, slug: str) -> HttpResponse:
    """List a workflow's outbound webhook subscriptions (without their secrets)."""
    workflow = versions.get_workflow(slug)
    rows = WebhookSubscription.objects.filter(workflow=workflow).select_related("workflow")
    return render({"items": [s.subscription(x) for x in rows]})


def create_subscription(call: Call, slug: str) -> HttpResponse:
    """Subscribe a URL to a workflow's run and dead-letter events; `secret` is in this answer only."""
    b = call.body
    sub = webhooks.create_subscription(versions.get_workflow(slug), b.url, list(b.events), actor=call.key)
    data = s.subscription(sub)
    location = f"/api/v1/subscriptions/{sub.pk}"
    return render({**data, "secret": sub.secret}, 201, {"Location": location})


def read_subscription(call: Call, subscription_id: int) -> HttpResponse:
    """Read a webhook subscription."""
    return render(s.subscription(webhooks.get_subscription(subscription_id)))


def delete_subscription(call: Call, subscription_id: int) -> HttpResponse:
    """Delete a webhook subscription and its delivery log."""
    webhooks.delete_subscription(subscription_id, actor=call.key)
    return no_content()


def list_deliveries(call: Call, subscription_id: int) -> HttpResponse:
    """Read a subscription's delivery log, newest first: status, attempts, responses, errors."""
    webhooks.get_subscription(subscription_id)
    rows = WebhookDelivery.objects.filter(subscription_id=subscription_id)
    if call.query.status:
        rows = rows.filter(status=call.query.status)
    return render(paginate(rows, call.query, "id", s.delivery))
