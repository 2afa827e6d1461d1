"""The secrets page, for admins: names, who changed each when, which workflows use it; a form
that sets a value (write-only: the page never holds one, not even in the form it re-renders).

Thin: every change is one call into `workflows.secrets.catalog`, the API's own; a refused
change re-renders the page with the message beside the form (4xx), an accepted one redirects.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from monitoring.views.guards import requires
from workflows.secrets import catalog
from workflows.secrets.usage import workflows_using
from workflows.store.errors import DomainError
from workflows.store.secrets import Secret, keys


def page_context(**extra: Any) -> dict[str, Any]:
    rows = [
        {"secret": row, "used_by": workflows_using(row.name), "changes": catalog.history(row.name, 5)}
        for row in Secret.objects.all()
    ]
    return {"nav": "secrets", "rows": rows, "has_key": bool(keys()), **extra}


@require_GET
@requires("manage_secrets")
def secrets_page(request: HttpRequest) -> HttpResponse:
    name = request.GET.get("name", "")
    replacing = Secret.objects.filter(name=name).first()
    description = replacing.description if replacing else ""
    return render(request, "secrets/secrets.html", page_context(name=name, description=description))


@require_POST
@requires("manage_secrets")
def save_secret(request: HttpRequest) -> HttpResponse:
    name = request.POST.get("name", "").strip()
    description = request.POST.get("description", "").strip()
    try:
        catalog.set_secret(name, request.POST.get("value", ""), actor=request.user, description=description)
    except DomainError as exc:
        context = page_context(error=exc.message, name=name, description=description)
        return render(request, "secrets/secrets.html", context, status=exc.http_status)
    messages.success(request, f"Secret {name} saved.")
    return redirect("secrets:page")


@require_POST
@requires("manage_secrets")
def delete_secret(request: HttpRequest, name: str) -> HttpResponse:
    try:
        catalog.delete_secret(name, actor=request.user)
    except DomainError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Secret {name} deleted.")
    return redirect("secrets:page")
