"""The runs page: search, keyset pages both ways, bulk cancel and replay; re-run from a node.

Thin: the search is `workflows.runsearch`, the bulk actions `workflows.runbulk`, the re-run
`workflows.reruns`. "Everything matching" first answers with a confirmation that shows how
many runs match; only the confirmed POST (carrying that count) acts.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from controlplane import access
from monitoring.views import HtmxRequest
from monitoring.views.filters import RunFilter
from monitoring.views.guards import requires
from workflows.core.states import RunStatus
from workflows.forks import forking
from workflows.runs import bulk as runbulk, rerun as reruns, search as runsearch, waiting
from workflows.store.errors import DomainError, Invalid
from workflows.store.models import Run, Workflow

PAGE_SIZE = 50
BULK_PERMISSION = {"cancel": "cancel_run", "replay": "replay"}


@require_GET
@requires("view")
def runs_list(request: HtmxRequest) -> HttpResponse:
    flt = RunFilter.parse(request.GET)
    matching: dict[str, int] = {}
    try:
        search = flt.search()
        found = search.apply(Run.objects.select_related("workflow", "version"))
        page = runsearch.page(found, PAGE_SIZE, flt.before, flt.after)
        for action, needs in BULK_PERMISSION.items():  # the "all matching" buttons state their count
            if access.can(request.user, needs):
                matching[action] = runbulk.count_matching(action, search)  # type: ignore[arg-type]  # a key of BULK_PERMISSION: an Action
        problem = ""
    except Invalid as exc:
        page, problem = runsearch.RunPage([], None, None), exc.message
    context = {
        "page": page,
        "runs": page.runs,
        "failures": runsearch.failures([r.pk for r in page.runs]),
        "forked": forking.origins_of([r.pk for r in page.runs]),
        "waiting": waiting.waiting_for(page.runs),
        "problem": problem,
        "filter": flt,
        "statuses": tuple(RunStatus),
        "workflows": Workflow.objects.order_by("slug").values_list("slug", flat=True),
        "selected": set(),
        "matching": matching,
        "count_cap": runbulk.COUNT_CAP,
        "nav": "runs",
    }
    template = "monitoring/fragments/runs_list.html" if request.htmx else "monitoring/runs.html"
    return render(request, template, context, status=400 if problem and not request.htmx else 200)


@require_POST
@requires("view")
def runs_bulk(request: HttpRequest) -> HttpResponse:
    """Cancel or replay the selected runs, or every run matching the search (after a count)."""
    action, _, scope = request.POST.get("do", "").partition("-")
    if action not in BULK_PERMISSION:
        return HttpResponse(
            "do must be cancel-selected, cancel-matching, replay-selected or replay-matching.", status=400
        )
    if not access.can(request.user, BULK_PERMISSION[action]):
        raise PermissionDenied(f"Your role may not {action} runs.")
    flt = RunFilter.parse(request.POST)
    reason = request.POST.get("reason", "").strip()[:500]
    back = reverse("runs") + "?" + flt.query()
    try:
        chosen: runsearch.RunSearch | list[int] = chosen_runs(request, flt, scope)
        if isinstance(chosen, runsearch.RunSearch):
            count = runbulk.matching(action, chosen).count()  # type: ignore[arg-type]  # action is a key of BULK_PERMISSION (checked above): an Action
            if request.POST.get("confirmed") != str(count):
                context = {"action": action, "count": count, "filter": flt, "reason": reason}
                return render(request, "monitoring/runs_confirm.html", {**context, "max": runbulk.MAX_BULK})
        result = runbulk.act_on_runs(action, chosen, request.user, reason)  # type: ignore[arg-type]  # as above
    except DomainError as exc:
        messages.error(request, exc.message)
        return redirect(back)
    if result.done:
        verb = "Cancelled" if action == "cancel" else "Replayed the dead letters of"
        messages.success(request, f"{verb} {len(result.done)} run(s).")
    for refusal in result.refused[:5]:
        messages.error(request, refusal["reason"])
    if not (result.done or result.refused):
        messages.info(request, "No run was selected.")
    return redirect(back)


def chosen_runs(request: HttpRequest, flt: RunFilter, scope: str) -> runsearch.RunSearch | list[int]:
    if scope == "matching":
        return flt.search()
    return [int(i) for i in request.POST.getlist("ids") if i.isdigit() and len(i) < 19][: runbulk.MAX_BULK]


@require_POST
@requires("rerun_node")
def run_rerun(request: HttpRequest, run_id: int) -> HttpResponse:
    """Re-run the chosen node of a finished run and everything downstream of it."""
    node_id = request.POST.get("node", "")[:64]
    try:
        nodes = reruns.rerun_from_node(run_id, node_id, request.user)
        messages.success(request, f"Run {run_id} re-runs from {node_id}: {', '.join(nodes)}.")
    except DomainError as exc:
        messages.error(request, exc.message)
    return redirect("run_detail", run_id=run_id)
