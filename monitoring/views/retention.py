"""The Retention page (admins): the age settings, each workflow's override, the tables' sizes."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from monitoring.views.guards import requires
from workflows.operations import retention
from workflows.store.errors import DomainError
from workflows.store.models import Workflow


@require_GET
@requires("manage_retention")
def retention_page(request: HttpRequest) -> HttpResponse:
    sizes = retention.table_sizes()
    context = {
        "nav": "retention",
        "default_days": retention.default_days(),
        "every_seconds": retention.PRUNE_EVERY_SECONDS,
        "batch": retention.BATCH,
        "workflows": Workflow.objects.order_by("slug"),
        "sizes": sizes,
        "total_bytes": sum(t.total_bytes for t in sizes),
    }
    return render(request, "monitoring/retention.html", context)


@require_POST
@requires("manage_retention")
def workflow_retention(request: HttpRequest, slug: str) -> HttpResponse:
    workflow = get_object_or_404(Workflow, slug=slug)
    raw = request.POST.get("retention_days", "").strip()
    try:
        days = None if raw == "" else int(raw)
    except ValueError:
        messages.error(request, f"retention_days: {raw[:20]!r} is not a whole number of days.")
        return redirect("retention")
    try:
        retention.set_workflow_days(workflow, days, request.user)
    except DomainError as exc:
        messages.error(request, str(exc))
        return redirect("retention")
    shown = "the default" if days is None else ("for ever" if days == 0 else f"{days} days")
    messages.success(request, f"{workflow.slug}: finished runs are kept {shown}.")
    return redirect("retention")
