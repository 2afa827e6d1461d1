"""The charts' JSON: one endpoint per chart, a window and optionally a workflow."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET

from monitoring.services import charts
from monitoring.views.guards import requires
from workflows.store.models import Workflow


@require_GET
@requires("view")
def chart_data(request: HttpRequest, name: str) -> JsonResponse:
    """`/charts/<name>.json?window=1h[&workflow=slug]`; a bad name or window is a 400 saying which."""
    window = request.GET.get("window", "1h")
    if name not in charts.CHARTS:
        return problem(f"chart: choose one of {', '.join(charts.CHARTS)}; got {name!r}.")
    if window not in charts.WINDOWS:
        return problem(f"window: choose one of {', '.join(charts.WINDOWS)}; got {window[:20]!r}.")
    slug = request.GET.get("workflow")
    workflow_id = get_object_or_404(Workflow, slug=slug).pk if slug else None
    return JsonResponse(charts.chart(name, window, workflow_id))


def problem(detail: str) -> JsonResponse:
    return JsonResponse({"title": "Bad request", "status": 400, "detail": detail}, status=400)
