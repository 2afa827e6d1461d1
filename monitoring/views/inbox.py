"""The inbox: every approval waiting that the viewer may decide, a detail pane, decisions.

Thin like the other pages: who sees and decides what is `approvals.inbox` and `approvals.decide`
(and through them controlplane.access), the same calls as the API's. A refused decision is
answered with its 4xx status and the pane re-rendered around the message and the fields it
names, so that htmx shows it inline and a browser without JavaScript shows the same page.
The list refreshes itself when the broadcaster says approvals changed (topic `approvals`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from controlplane import access
from monitoring.views import HtmxRequest, decision_form
from monitoring.views.filters import AGES, InboxFilter
from monitoring.views.guards import requires
from workflows.budgets import holds as budget_holds
from workflows.core.definition import Issue
from workflows.store.errors import DomainError, Forbidden, Invalid
from workflows.store.models import Wait, Workflow
from workflows.waits import approvals

LIST_LIMIT = 200
MAX_BULK = 200
DETAIL = "monitoring/fragments/inbox_detail.html"


def pending_count(user: Any) -> int | None:
    """How many approvals `user` may decide now, or None when their role decides none."""
    if not access.can(user, "decide_approval"):
        return None
    return approvals.inbox_queryset(user).count()


def inbox_nav(request: HtmxRequest) -> dict[str, Any]:
    """Context processor: the navigation's pending count, counted only if a page shows it."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"inbox_pending": lambda: pending_count(user)}


def list_context(request: HtmxRequest, flt: InboxFilter) -> dict[str, Any]:
    rows = approvals.inbox(request.user, flt.for_domain(), limit=LIST_LIMIT)
    return {
        "approvals": rows,
        "filter": flt,
        "ages": AGES,
        "workflows": Workflow.objects.order_by("slug").values_list("slug", flat=True),
        "limit": LIST_LIMIT,
        "now": timezone.now(),
    }


@require_GET
@requires("decide_approval")
def inbox(request: HtmxRequest) -> HttpResponse:
    flt = InboxFilter.parse(request.GET)
    context = {**list_context(request, flt), "nav": "inbox"}
    if access.can(request.user, "manage_budgets"):  # calls held by a budget that asks a person
        context["budget_holds"] = budget_holds.asking()
    if request.htmx and request.GET.get("fragment") == "list":
        return render(request, "monitoring/fragments/inbox_list.html", context)
    return render(request, "monitoring/inbox.html", context)


@require_GET
@requires("decide_approval")
def inbox_count(request: HtmxRequest) -> HttpResponse:
    return render(request, "monitoring/fragments/inbox_count.html")


# --------------------------------------------------------------------------- one approval


@dataclass
class Refusal:
    status: int
    message: str
    errors: dict[str, str]


def approval_of(request: HtmxRequest, approval_id: int) -> Wait:
    """The approval, if this person may decide it (the same rule as the inbox and the API)."""
    wait = approvals.get_approval(approval_id)
    if not approvals.can_decide(request.user, wait):
        raise Forbidden(
            f"You may not decide approval {approval_id} ({wait.node_id}): its node does not name you."
        )
    return wait


def detail_context(
    wait: Wait, posted: dict[str, Any] | None = None, refusal: Refusal | None = None
) -> dict[str, Any]:
    context = approvals.approval_context(wait)
    posted = posted or {}
    errors = refusal.errors if refusal else {}
    fields = decision_form.fields_of(context["form"], posted.get("fields"))
    for f in fields:
        f.error = errors.get(f.name, "")
    proposed = posted.get("data_text")
    if proposed is None:
        proposed = json.dumps(context["proposed"], indent=2, ensure_ascii=False)
    now = timezone.now()
    return {
        "wait": wait,
        "ctx": context,
        "fields": fields,
        "proposed_text": proposed,
        "comment": posted.get("comment", ""),
        "refusal": refusal,
        "errors": errors,
        "is_open": wait.closed_at is None and wait.node_run.status == "waiting",
        "overdue": wait.closed_at is None and wait.due_at is not None and wait.due_at < now,
        "now": now,
    }


def render_detail(
    request: HtmxRequest, wait: Wait | None, context: dict[str, Any], status: int = 200
) -> HttpResponse:
    if request.htmx:
        return render(request, DETAIL, context, status=status)
    flt = InboxFilter.parse(request.GET)
    page = {**list_context(request, flt), **context, "nav": "inbox", "selected": wait}
    return render(request, "monitoring/inbox.html", page, status=status)


def refused(request: HtmxRequest, exc: DomainError) -> HttpResponse:
    """A refusal before any approval could be shown: its message, in the pane."""
    refusal = Refusal(exc.http_status, str(exc), {})
    return render_detail(request, None, {"refusal": refusal}, status=exc.http_status)


@require_GET
@requires("decide_approval")
def approval_detail(request: HtmxRequest, approval_id: int) -> HttpResponse:
    try:
        wait = approval_of(request, approval_id)
    except DomainError as exc:
        return refused(request, exc)
    return render_detail(request, wait, detail_context(wait))


@require_POST
@requires("decide_approval")
def approval_decide(request: HtmxRequest, approval_id: int) -> HttpResponse:
    """Approve or reject with the form's fields, a comment and the proposed data as edited."""
    try:
        wait = approval_of(request, approval_id)
    except DomainError as exc:
        return refused(request, exc)
    form = approvals.approval_context(wait)["form"]
    posted: dict[str, Any] = {
        "fields": decision_form.parse_fields(form, request.POST),
        "comment": request.POST.get("comment", "").strip(),
        "data_text": request.POST.get("data", None),
    }
    decision = request.POST.get("decision", "")
    try:
        data = edited_data(wait, posted["data_text"])
        approvals.decide(
            wait.pk, request.user, decision, posted["fields"], posted["comment"], data, via="inbox"
        )
    except DomainError as exc:
        refusal = Refusal(exc.http_status, str(exc.message), decision_form.field_errors(exc.issues))
        wait.refresh_from_db()
        return render_detail(request, wait, detail_context(wait, posted, refusal), exc.http_status)
    word = "Approved" if decision == "approve" else "Rejected"
    text = f"{word}: {wait.title or wait.node_id} (run {wait.run_id})."
    if not request.htmx:
        messages.success(request, text)
        return redirect(reverse("inbox") + "?" + InboxFilter.parse(request.GET).query())
    wait.refresh_from_db()
    response = render(request, DETAIL, {**detail_context(wait), "done": text})
    response["HX-Trigger"] = "sy:refresh-approvals"
    return response


def edited_data(wait: Wait, text: str | None) -> Any:
    """The proposed data as edited in the pane: None (as proposed) when unchanged or not sent."""
    if text is None or not text.strip():
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise Invalid(
            f"The proposed data is not valid JSON ({exc.msg}, line {exc.lineno}); nothing was decided.",
            [Issue("data", f"not valid JSON: {exc.msg} at line {exc.lineno}")],
        ) from None
    return None if data == wait.proposed else data


# --------------------------------------------------------------------------- bulk


@require_POST
@requires("decide_approval")
def inbox_bulk(request: HtmxRequest) -> HttpResponse:
    """Approve or reject the selected approvals with one comment; each is decided on its own,
    so one refused (not yours, decided meanwhile, a required field) does not stop the rest."""
    flt = InboxFilter.parse(request.POST)
    back = redirect(reverse("inbox") + ("?" + flt.query() if flt.is_set else ""))
    decision = request.POST.get("decision", "")
    if decision not in ("approve", "reject"):
        messages.error(request, "Choose Approve or Reject for the selected approvals.")
        return back
    ids = [int(i) for i in request.POST.getlist("ids") if i.isdigit()][:MAX_BULK]
    if not ids:
        messages.info(request, "No approval was selected: tick the ones to decide first.")
        return back
    comment = request.POST.get("comment", "").strip()
    done, refusals = decide_each(request.user, ids, decision, comment)
    if done:
        word = "Approved" if decision == "approve" else "Rejected"
        messages.success(request, f"{word} {done} approval{'s' if done != 1 else ''}.")
    for text in refusals[:5]:
        messages.error(request, text)
    if len(refusals) > 5:
        messages.error(request, f"… and {len(refusals) - 5} more refused.")
    return back


def decide_each(user: Any, ids: list[int], decision: str, comment: str) -> tuple[int, list[str]]:
    done, refusals = 0, []
    for wait_id in ids:
        try:
            approvals.decide(wait_id, user, decision, {}, comment, None, via="inbox")
            done += 1
        except DomainError as exc:
            refusals.append(f"Approval {wait_id}{where(wait_id)}: {exc}")
    return done, refusals


def where(wait_id: int) -> str:
    """Name an approval for a refusal: its node and run, when it exists."""
    found = Wait.objects.filter(pk=wait_id).values_list("node_id", "run_id").first()
    return f" ({found[0]} of run {found[1]})" if found else ""
