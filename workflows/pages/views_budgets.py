"""The budgets page: every spend budget with its window's figures and the runs it holds
(viewers), the form that adds and changes budgets, and allowing a held call once (admins).

Thin: every change is one call into workflows/budgets (the API's own); a refused save
re-renders the page with the message and the offending fields (status 422), an accepted one
redirects. Cancelling a held run is the run page's own Cancel.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from monitoring.views.guards import requires
from workflows.budgets import holds, manage
from workflows.core import budgets as core
from workflows.store.errors import DomainError
from workflows.store.models import Budget, Workflow


def page_context(**extra: Any) -> dict[str, Any]:
    found = manage.figures()
    charts = manage.burns(found)
    return {
        "nav": "budgets",
        "budgets": [(f, holds.held_by(f.budget.pk)) for f in found],
        "burns": [(f, charts[f.budget.pk]) for f in found if f.budget.pk in charts],
        "workflows": Workflow.objects.order_by("slug").values_list("slug", flat=True),
        "units": core.UNITS,
        "windows": core.WINDOWS,
        "scopes": core.SCOPES,
        "policies": core.POLICIES,
        "bad_fields": [],
        **extra,
    }


@require_GET
@requires("view")
def budgets_page(request: HttpRequest) -> HttpResponse:
    editing = (
        Budget.objects.filter(pk=int(request.GET["edit"])).first()
        if request.GET.get("edit", "").isdigit()
        else None
    )
    posted = manage.as_dict(editing) if editing else {"window": core.DAY, "policy": core.WAIT}
    return render(request, "budgets/budgets.html", page_context(editing=editing, posted=posted))


@require_POST
@requires("manage_budgets")
def save_budget(request: HttpRequest) -> HttpResponse:
    post = request.POST
    existing = int(post["existing"]) if post.get("existing", "").isdigit() else None
    data = {field: post.get(field, "") for field in manage.FIELDS}
    try:
        budget = manage.save_budget(data, existing, actor=request.user)
    except DomainError as exc:
        editing = Budget.objects.filter(pk=existing).first() if existing else None
        bad = [issue.path for issue in exc.issues]
        context = page_context(editing=editing, posted=data, budget_error=exc.message, bad_fields=bad)
        return render(request, "budgets/budgets.html", context, status=exc.http_status)
    messages.success(request, f"Budget {budget.name} saved.")
    return redirect("budgets:page")


@require_POST
@requires("manage_budgets")
def delete_budget(request: HttpRequest, budget_id: int) -> HttpResponse:
    try:
        manage.delete_budget(budget_id, actor=request.user)
    except DomainError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, "Budget deleted; the runs it held are offered again.")
    return redirect("budgets:page")


@require_POST
@requires("manage_budgets")
def allow_hold(request: HttpRequest, hold_id: int) -> HttpResponse:
    try:
        row = holds.allow_once(hold_id, request.user)
    except DomainError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Run {row.run_id} may make its call over the budget, once.")
    return redirect("inbox" if request.POST.get("back") == "inbox" else "budgets:page")
