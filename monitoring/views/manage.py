"""Pages that manage what used to live only in the Django admin: API keys, inbound
triggers, outbound webhook subscriptions (with their delivery log), workflow pause/resume,
draining and pausing workers.

Thin views: authorize with the same actions as the API (controlplane.access), one call into
the domain module the API calls (workflows.keys, workflows.webhooks, workflows.runs), which
also writes the audit entry. A secret is shown once, in the answer to the POST that made it,
never stored in the session or a message.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from controlplane import access
from monitoring.views.guards import requires
from workflows.integrations import keys, webhooks
from workflows.mcp_server import connection
from workflows.mcp_server.connection import PATH as MCP_PATH
from workflows.operations import workers
from workflows.runs import actions as runs
from workflows.store.errors import DomainError, Invalid
from workflows.store.models import Trigger, WebhookDelivery, WebhookSubscription, Workflow

DELIVERY_PAGE = 50


# --------------------------------------------------------------------------- API keys


def keys_context(request: HttpRequest, query: str = "", plaintext: str = "", **extra: Any) -> dict[str, Any]:
    """The page's context; the MCP snippets carry the key just made, else a placeholder."""
    rows = keys.matching_keys(query).select_related("owner").order_by("-id")[:200]
    mcp_url = request.build_absolute_uri(MCP_PATH)
    context = {"keys": rows, "query": query, "scopes": access.SCOPES, "now": timezone.now(), "nav": "keys"}
    mcp = {
        "mcp_url": mcp_url,
        "mcp_snippets": connection.snippets(mcp_url, plaintext),
        "plaintext": plaintext,
    }
    return {**context, **mcp, **extra}


@require_http_methods(["GET", "POST"])
@requires("manage_keys")
def api_keys(request: HttpRequest) -> HttpResponse:
    """List keys; a POST creates one and answers with its plaintext, shown this once."""
    if request.method == "GET":
        query = request.GET.get("q", "").strip()[:100]
        return render(request, "monitoring/keys.html", keys_context(request, query))
    try:
        scopes = request.POST.getlist("scopes")
        expires = parse_expiry(request.POST.get("expires_at", ""))
        key, plaintext = keys.create_key(
            request.user,
            request.POST.get("name", "").strip()[:100] or "unnamed",
            scopes,
            expires,
            request.user,
        )
    except DomainError as exc:
        return render(request, "monitoring/keys.html", keys_context(request, error=str(exc)), status=400)
    return render(request, "monitoring/keys.html", keys_context(request, created=key, plaintext=plaintext))


def parse_expiry(text: str) -> datetime | None:
    """The form's `expires_at` (a datetime-local value, taken as the server's time zone)."""
    if not text.strip():
        return None
    moment = parse_datetime(text.strip())
    if moment is None:
        raise Invalid("expires_at: give a date and time like 2030-01-31T12:00, or leave it empty.")
    return timezone.make_aware(moment) if timezone.is_naive(moment) else moment


@require_POST
@requires("manage_keys")
def api_key_revoke(request: HttpRequest, key_id: int) -> HttpResponse:
    call = partial(keys.revoke_key, key_id, actor=request.user)
    return act(request, call, "API key revoked: it is refused from the next request on.", "api_keys")


def act(
    request: HttpRequest,
    call: Callable[[], Any],
    done: str | Callable[[Any], str],
    back: str,
    **back_args: Any,
) -> HttpResponse:
    """Carry out one domain call; say what happened (`done`, or `done(result)`) or why not; go back."""
    try:
        result = call()
        messages.success(request, done(result) if callable(done) else done)
    except DomainError as exc:
        messages.error(request, str(exc))
    response: HttpResponse = redirect(back, **back_args)
    return response


# --------------------------------------------------------------------------- webhooks of a workflow


def webhooks_context(workflow: Workflow, **extra: Any) -> dict[str, Any]:
    return {
        "workflow": workflow,
        "triggers": Trigger.objects.filter(workflow=workflow),
        "subscriptions": WebhookSubscription.objects.filter(workflow=workflow),
        "event_types": webhooks.EVENT_TYPES,
        "nav": "workflows",
        **extra,
    }


@require_GET
@requires("manage_webhooks")
def workflow_webhooks(request: HttpRequest, slug: str) -> HttpResponse:
    workflow = get_object_or_404(Workflow, slug=slug)
    return render(request, "monitoring/webhooks.html", webhooks_context(workflow))


def show_secret(request: HttpRequest, workflow: Workflow, **shown: Any) -> HttpResponse:
    """Answer a POST that made a secret with the page showing it, this once."""
    return render(request, "monitoring/webhooks.html", webhooks_context(workflow, **shown))


@require_POST
@requires("manage_webhooks")
def trigger_create(request: HttpRequest, slug: str) -> HttpResponse:
    workflow = get_object_or_404(Workflow, slug=slug)
    name = request.POST.get("name", "").strip()[:100]
    if not name:
        messages.error(request, "name: give the trigger a name, e.g. the system that sends it.")
        return redirect("workflow_webhooks", slug=slug)
    trigger = webhooks.create_trigger(workflow, name, actor=request.user)
    return show_secret(request, workflow, secret_trigger=trigger)


@require_POST
@requires("manage_webhooks")
def trigger_rotate(request: HttpRequest, slug: str, trigger_id: str) -> HttpResponse:
    workflow = get_object_or_404(Workflow, slug=slug)
    try:
        trigger = webhooks.rotate_trigger_secret(owned_trigger(workflow, trigger_id), actor=request.user)
    except DomainError as exc:
        messages.error(request, str(exc))
        return redirect("workflow_webhooks", slug=slug)
    return show_secret(request, workflow, secret_trigger=trigger, rotated=True)


def owned_trigger(workflow: Workflow, trigger_id: str) -> str:
    """The trigger id if it belongs to this workflow (a URL may not cross workflows)."""
    get_object_or_404(Trigger, pk=trigger_id, workflow=workflow)
    return trigger_id


@require_POST
@requires("manage_webhooks")
def trigger_delete(request: HttpRequest, slug: str, trigger_id: str) -> HttpResponse:
    workflow = get_object_or_404(Workflow, slug=slug)
    target = owned_trigger(workflow, trigger_id)
    call = partial(webhooks.delete_trigger, target, actor=request.user)
    return act(
        request, call, "Trigger deleted: its URL answers 404 from now on.", "workflow_webhooks", slug=slug
    )


@require_POST
@requires("manage_webhooks")
def subscription_create(request: HttpRequest, slug: str) -> HttpResponse:
    workflow = get_object_or_404(Workflow, slug=slug)
    url, events = request.POST.get("url", "").strip()[:2000], request.POST.getlist("events")
    try:
        subscription = webhooks.create_subscription(workflow, url, events, actor=request.user)
    except DomainError as exc:
        messages.error(request, str(exc))
        return redirect("workflow_webhooks", slug=slug)
    return show_secret(request, workflow, secret_subscription=subscription)


@require_POST
@requires("manage_webhooks")
def subscription_delete(request: HttpRequest, slug: str, subscription_id: int) -> HttpResponse:
    subscription = get_object_or_404(WebhookSubscription, pk=subscription_id, workflow__slug=slug)
    call = partial(webhooks.delete_subscription, subscription.pk, actor=request.user)
    return act(request, call, "Subscription deleted.", "workflow_webhooks", slug=slug)


@require_GET
@requires("manage_webhooks")
def subscription_detail(request: HttpRequest, slug: str, subscription_id: int) -> HttpResponse:
    """The delivery log, newest first, with "send again" on finished deliveries."""
    subscription = get_object_or_404(
        WebhookSubscription.objects.select_related("workflow"), pk=subscription_id, workflow__slug=slug
    )
    deliveries = WebhookDelivery.objects.filter(subscription=subscription).order_by("-id")[:DELIVERY_PAGE]
    context = {"subscription": subscription, "workflow": subscription.workflow, "deliveries": deliveries}
    return render(request, "monitoring/subscription.html", {**context, "nav": "workflows"})


@require_POST
@requires("manage_webhooks")
def delivery_resend(request: HttpRequest, slug: str, subscription_id: int, delivery_id: int) -> HttpResponse:
    get_object_or_404(WebhookDelivery, pk=delivery_id, subscription_id=subscription_id)
    call = partial(webhooks.resend_delivery, delivery_id, actor=request.user)
    back = {"slug": slug, "subscription_id": subscription_id}
    return act(request, call, f"Delivery {delivery_id} is being sent again.", "subscription_detail", **back)


# --------------------------------------------------------------------------- pause and resume


@require_POST
@requires("pause_workflow")
def workflow_pause(request: HttpRequest, slug: str) -> HttpResponse:
    workflow = get_object_or_404(Workflow, slug=slug)
    call = partial(runs.pause_workflow, workflow, request.user)
    done = f"{workflow.slug} paused: new runs wait until it is resumed; runs in flight go on."
    return act(request, call, done, "workflow_live", slug=slug)


@require_POST
@requires("pause_workflow")
def workflow_resume(request: HttpRequest, slug: str) -> HttpResponse:
    workflow = get_object_or_404(Workflow, slug=slug)
    call = partial(runs.resume_workflow, workflow, request.user)
    done = f"{workflow.slug} resumed: {{}} waiting run(s) started.".format
    return act(request, call, done, "workflow_live", slug=slug)


# --------------------------------------------------------------------------- workers


@require_POST
@requires("manage_workers")
def worker_drain(request: HttpRequest) -> HttpResponse:
    """Drain (`action=drain`) or let go (`action=undrain`) the worker named in the form."""
    name = request.POST.get("worker", "")[:200]
    if request.POST.get("action") == "undrain":
        call, done = partial(workers.undrain_worker, name, request.user), f"{name} takes jobs again."
    else:
        call = partial(workers.drain_worker, name, request.user)
        done = f"{name} is draining: it finishes its current job and takes no new one."
    return act(request, call, done, "workers")


@require_POST
@requires("manage_workers")
def workers_pause(request: HttpRequest) -> HttpResponse:
    if request.POST.get("action") == "resume":
        return act(request, partial(workers.resume_workers, request.user), "Workers resumed.", "workers")
    done = "Workers paused: each finishes its current job, then waits until resumed."
    return act(request, partial(workers.pause_workers, request.user), done, "workers")
