"""The events pages: every event published to a topic (searchable, with the runs it started),
one event (its data, and replay to a subscription, for operators), and a workflow's topics
(subscribe with a filter and an input mapping, for editors).

Thin: each change is one call into `workflows.events`, the API's own; a refused change
re-renders its page with the message beside the form (4xx), an accepted one redirects.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from monitoring.views.guards import requires
from workflows.events import archive, hooks, publishing, subscriptions
from workflows.store.errors import DomainError
from workflows.store.models import Workflow
from workflows.store.topics import Topic, TopicEvent

PAGE_SIZE = 50


def events_context(request: HttpRequest, **extra: Any) -> dict[str, Any]:
    get = request.GET
    found = archive.EventSearch(
        topic=get.get("topic", "").strip(),
        type=get.get("type", "").strip(),
        source=get.get("source", "").strip(),
        q=get.get("q", "").strip(),
    )
    return {
        "nav": "events",
        "filter": found,
        "page": Paginator(archive.search(found), PAGE_SIZE).get_page(get.get("page")),
        "topics": Topic.objects.values_list("name", flat=True),
        "hooks": hooks.hooks_of(),
        **extra,
    }


@require_GET
@requires("view")
def events_page(request: HttpRequest) -> HttpResponse:
    return render(request, "events/events.html", events_context(request))


@require_POST
@requires("manage_webhooks")
def create_hook(request: HttpRequest) -> HttpResponse:
    """Make a signed hook into a topic; the page shows its secret this once."""
    post = request.POST
    try:
        hook = hooks.create_hook(
            post.get("topic", "").strip(),
            post.get("name", ""),
            post.get("event_type", ""),
            actor=request.user,
        )
    except DomainError as exc:
        context = events_context(request, hook_error=str(exc), posted=post)
        return render(request, "events/events.html", context, status=exc.http_status)
    return render(request, "events/events.html", events_context(request, created_hook=hook))


@require_POST
@requires("manage_webhooks")
def delete_hook(request: HttpRequest, hook_id: str) -> HttpResponse:
    hook = hooks.get_hook(hook_id)
    hooks.delete_hook(hook.pk, actor=request.user)
    messages.success(
        request, f"Hook {hook.name} into {hook.topic.name} deleted; its URL answers 404 from now on."
    )
    return redirect("events:list")


def event_context(row: TopicEvent, **extra: Any) -> dict[str, Any]:
    return {
        "nav": "events",
        "event": row,
        "data": json.dumps(row.data, indent=2, ensure_ascii=False),
        "subscriptions": archive.subscriptions_for(row),
        **extra,
    }


@require_GET
@requires("view")
def event_page(request: HttpRequest, event_id: int) -> HttpResponse:
    row = get_object_or_404(TopicEvent.objects.select_related("topic"), pk=event_id)
    return render(request, "events/event.html", event_context(row))


@require_POST
@requires("replay")
def replay_event(request: HttpRequest, event_id: int) -> HttpResponse:
    row = get_object_or_404(TopicEvent.objects.select_related("topic"), pk=event_id)
    try:
        run_id = publishing.replay(row.pk, int(request.POST.get("subscription") or 0), actor=request.user)
    except (DomainError, ValueError) as exc:
        message = exc.message if isinstance(exc, DomainError) else "subscription: choose one."
        return render(request, "events/event.html", event_context(row, error=message), status=422)
    messages.success(request, f"Event replayed: run {run_id} started.")
    return redirect("events:detail", event_id=row.pk)


def topics_context(workflow: Workflow, **extra: Any) -> dict[str, Any]:
    subs = subscriptions.subscriptions_of(workflow)
    recent = TopicEvent.objects.filter(topic__in=[s.topic_id for s in subs]).select_related("topic")[:20]
    rows = [
        {"sub": sub, "mapping": json.dumps(sub.input_mapping) if sub.input_mapping else ""} for sub in subs
    ]
    return {"nav": "workflows", "workflow": workflow, "rows": rows, "recent": recent, **extra}


@require_http_methods(["GET", "POST"])
@requires("view")
def workflow_topics(request: HttpRequest, slug: str) -> HttpResponse:
    """A workflow's topics; a POST (editors) subscribes it or changes a subscription."""
    workflow = get_object_or_404(Workflow, slug=slug)
    if request.method == "GET":
        return render(request, "events/workflow_topics.html", topics_context(workflow))
    return subscribe(request, workflow)


@requires("manage_subscriptions")
def subscribe(request: HttpRequest, workflow: Workflow) -> HttpResponse:
    post = request.POST
    topic = post.get("topic", "").strip()
    try:
        mapping = json.loads(post["input_mapping"]) if post.get("input_mapping", "").strip() else None
    except json.JSONDecodeError as exc:
        context = topics_context(workflow, error=f"input_mapping: not JSON: {exc}", posted=post)
        return render(request, "events/workflow_topics.html", context, status=422)
    try:
        subscriptions.subscribe(workflow, topic, post.get("filter", ""), mapping, request.user)
    except DomainError as exc:
        message = "; ".join(f"{i.path}: {i.message}" for i in exc.issues) or exc.message
        context = topics_context(workflow, error=message, posted=post)
        return render(request, "events/workflow_topics.html", context, status=exc.http_status)
    messages.success(request, f"{workflow.slug} is subscribed to {topic}.")
    return redirect("events:workflow_topics", slug=workflow.slug)


@require_POST
@requires("manage_subscriptions")
def unsubscribe(request: HttpRequest, slug: str) -> HttpResponse:
    workflow = get_object_or_404(Workflow, slug=slug)
    topic = request.POST.get("topic", "")
    try:
        subscriptions.unsubscribe(workflow, topic, request.user)
    except DomainError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"{workflow.slug} no longer listens to {topic}.")
    return redirect("events:workflow_topics", slug=workflow.slug)
