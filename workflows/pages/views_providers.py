"""The provider health page: each breaker's state, its recent errors and the runs held behind
it, the rates' windows (viewers); forcing a breaker open or closed (operators); a provider's
limits and breaker settings (admins).

Thin: every change is one call into workflows/providers_health/manage.py (the API's own); a
refused change re-renders the page with the message and the offending fields (its 4xx
status), an accepted one redirects. The breakers' card refreshes itself every few seconds
(htmx, the same view answering with the card alone).
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from monitoring.views.guards import requires
from workflows.providers_health import manage
from workflows.store.errors import DomainError
from workflows.store.models import LLMProvider

TEMPLATE = "providers/health.html"


def page_context(**extra: Any) -> dict[str, Any]:
    return {
        "nav": "providers",
        "breakers": manage.health(),
        "rates": manage.rate_views(),
        "providers": [
            (row, extra.get("posted") if extra.get("editing") == row.name else manage.limits_of(row))
            for row in LLMProvider.objects.order_by("name")
        ],
        "limit_fields": manage.LIMIT_FIELDS,
        "default_seconds": manage.DEFAULT_FORCE_SECONDS,
        "bad_fields": [],
        **extra,
    }


def explained(exc: DomainError) -> str:
    """The refusal with what was wrong with each field."""
    return " ".join([exc.message, *(str(getattr(issue, "message", issue)) for issue in exc.issues)])


@require_GET
@requires("view")
def health_page(request: HttpRequest) -> HttpResponse:
    if request.headers.get("HX-Request") == "true":
        return render(request, "providers/breakers_card.html", page_context())
    return render(request, TEMPLATE, page_context())


@require_POST
@requires("force_breaker")
def force_breaker(request: HttpRequest, name: str) -> HttpResponse:
    data = {field: request.POST.get(field, "") for field in ("state", "seconds", "reason")}
    try:
        found = manage.force(name, request.POST.get("model", ""), data, actor=request.user)
    except DomainError as exc:
        bad = [issue.path for issue in exc.issues]
        context = page_context(
            force_error=exc.message, bad_fields=bad, forcing=f"{name}/{request.POST.get('model', '')}"
        )
        return render(request, TEMPLATE, context, status=exc.http_status)
    state = "open" if found.state.state == "open" else "closed"
    messages.success(request, f"Breaker {found.name} forced {state}.")
    return redirect("providers:health")


@require_POST
@requires("manage_llm")
def save_limits(request: HttpRequest, name: str) -> HttpResponse:
    data = {field: request.POST.get(field, "") for field in manage.LIMIT_FIELDS}
    try:
        manage.save_limits(name, data, actor=request.user)
    except DomainError as exc:
        bad = [issue.path for issue in exc.issues]
        context = page_context(limits_error=explained(exc), bad_fields=bad, editing=name, posted=data)
        return render(request, TEMPLATE, context, status=exc.http_status)
    messages.success(request, f"Limits of {name} saved; every worker applies them within two seconds.")
    return redirect("providers:health")
