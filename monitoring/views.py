"""Pages of the operator dashboard: thin views, one call into the domain each.

Every page renders its live parts with fragment templates; the same templates answer an
htmx GET of the fragment (a re-sync) and are what the broadcaster or the consumer push over
the websocket. Actions are POSTs with CSRF, allowed by controlplane.access, carried out by
workflows.runs; a refused domain call is shown as a message, never a 500.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from controlplane import access
from monitoring import runstate, snapshots
from monitoring.filters import LetterFilter, RunFilter
from monitoring.guards import requires
from workflows import deadletters, mapitems, runs, texts
from workflows.core.states import RunStatus
from workflows.errors import DomainError, Invalid, NotFound
from workflows.models import AuditEntry, DeadLetter, NodeRun, Run, RunEvent, Workflow

PAGE_SIZE = 50
MAX_BULK = deadletters.MAX_BULK
OVERVIEW_FRAGMENTS = {
    "workflows": "monitoring/fragments/overview_workflows.html",
    "system": "monitoring/fragments/overview_system.html",
}


def liveness(request: HttpRequest) -> JsonResponse:
    """Answer 200 while the web process can serve requests."""
    return JsonResponse({"status": "ok"})


def fragment_or_page(request: HttpRequest, page: str, fragment: str, context: dict[str, Any]) -> HttpResponse:
    """Render the fragment for an htmx request, the whole page otherwise."""
    return render(request, fragment if request.htmx else page, context)


# --------------------------------------------------------------------------- overview, workers


@require_GET
@requires("view")
def overview(request: HttpRequest) -> HttpResponse:
    message = snapshots.current("overview")
    name = OVERVIEW_FRAGMENTS.get(request.GET.get("fragment", ""))
    if request.htmx and name:
        return render(request, name, {"snap": message["data"]})
    return render(request, "monitoring/overview.html", {"snap": message["data"], "nav": "overview"})


@require_GET
@requires("view")
def workers(request: HttpRequest) -> HttpResponse:
    snap = snapshots.current("workers")["data"]
    context = {"snap": snap, "nav": "workers"}
    return fragment_or_page(
        request, "monitoring/workers.html", "monitoring/fragments/workers_tables.html", context
    )


# --------------------------------------------------------------------------- workflows


@require_GET
@requires("view")
def workflow_live(request: HttpRequest, slug: str) -> HttpResponse:
    workflow = get_object_or_404(Workflow.objects.select_related("active_version"), slug=slug)
    version = workflow.active_version
    graph = graph_of(version.definition) if version else {"nodes": [], "edges": []}
    stats = snapshots.current(f"workflow:{workflow.pk}")["data"] if version else {"nodes": {}}
    context = {"workflow": workflow, "version": version, "graph": graph, "stats": stats, "nav": "workflows"}
    return render(request, "monitoring/workflow_live.html", context)


@require_GET
@requires("view")
def workflow_node(request: HttpRequest, slug: str, node_id: str) -> HttpResponse:
    """Recent attempts of one node of a workflow (its latest runs)."""
    workflow = get_object_or_404(Workflow, slug=slug)
    recent_runs = Run.objects.filter(workflow=workflow).order_by("-id").values("id")[:200]
    attempts = (
        RunEvent.objects.filter(run_id__in=recent_runs, node_id=node_id, kind="node.attempt")
        .order_by("-id")
        .values("run_id", "attempt", "started_at", "at", "worker", "data")[:25]
    )
    context = {"workflow": workflow, "node_id": node_id, "attempts": attempts}
    return render(request, "monitoring/fragments/node_attempts.html", context)


def graph_of(definition: dict[str, Any]) -> dict[str, Any]:
    """The part of a definition the graph view draws: node ids, handlers, edges."""
    return {
        "nodes": [
            {"id": n["id"], "handler": ("map · " if n.get("map") else "") + n.get("handler", "")}
            for n in definition.get("nodes", [])
        ],
        "edges": [{"source": e["source"], "target": e["target"]} for e in definition.get("edges", [])],
    }


# --------------------------------------------------------------------------- runs


@require_GET
@requires("view")
def runs_list(request: HttpRequest) -> HttpResponse:
    flt = RunFilter.parse(request.GET)
    rows = list(flt.apply(Run.objects.select_related("workflow", "version")).order_by("-id")[: PAGE_SIZE + 1])
    context = {
        "runs": rows[:PAGE_SIZE],
        "older": rows[PAGE_SIZE - 1].pk if len(rows) > PAGE_SIZE else None,
        "filter": flt,
        "statuses": tuple(RunStatus),
        "workflows": Workflow.objects.order_by("slug").values_list("slug", flat=True),
        "nav": "runs",
    }
    return fragment_or_page(request, "monitoring/runs.html", "monitoring/fragments/runs_list.html", context)


@require_GET
@requires("view")
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("workflow", "version"), pk=run_id)
    ctx = runstate.load(run, request.user)
    audit = AuditEntry.objects.filter(target_type="run", target_id=str(run.pk)).order_by("-id")[:50]
    context = {
        **ctx,
        "graph": graph_of(run.version.definition),
        "live": runstate.live_data(ctx),
        "audit": audit,
        "nav": "runs",
    }
    return render(request, "monitoring/run.html", context)


@require_GET
@requires("view")
def run_node(request: HttpRequest, run_id: int, node_id: str) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("workflow", "version"), pk=run_id)
    try:
        context = runstate.node_detail(run, node_id)
    except NodeRun.DoesNotExist:
        raise Http404(f"Run {run_id} has no node {node_id!r}.") from None
    return render(request, "monitoring/fragments/run_node.html", context)


@require_GET
@requires("view")
def run_node_items(request: HttpRequest, run_id: int, node_id: str) -> HttpResponse:
    """A page of a map node's items (50), filtered by progress bucket, after an index."""
    run = get_object_or_404(Run, pk=run_id)
    bucket = request.GET.get("status") or None
    after = request.GET.get("after", "-1")
    if bucket not in (None, *mapitems.BUCKETS) or not after.lstrip("-").isdigit() or len(after) > 6:
        return HttpResponse(
            "status must be done, failed, running or pending; after an item index.", status=400
        )
    try:
        context = runstate.node_items(run, node_id, bucket, int(after))
    except NotFound as exc:
        raise Http404(str(exc)) from None
    return render(request, "monitoring/fragments/run_node_items.html", context)


@require_POST
@requires("cancel_run")
def run_cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    try:
        runs.cancel_run(run_id, request.POST.get("reason", "").strip()[:500], request.user)
        messages.success(request, f"Run {run_id} cancelled.")
    except DomainError as exc:
        messages.error(request, str(exc))
    return redirect("run_detail", run_id=run_id)


# --------------------------------------------------------------------------- dead letters


def letters_query(flt: LetterFilter) -> Any:
    return flt.apply(DeadLetter.objects.select_related("run__workflow", "resolved_by"))


@require_GET
@requires("view")
def deadletters_list(request: HttpRequest) -> HttpResponse:
    flt = LetterFilter.parse(request.GET)
    rows = list(letters_query(flt).order_by("-id")[: PAGE_SIZE + 1])
    context = {
        "letters": rows[:PAGE_SIZE],
        "older": rows[PAGE_SIZE - 1].pk if len(rows) > PAGE_SIZE else None,
        "matching": letters_query(flt).count() if flt.is_open_only else None,
        "filter": flt,
        "workflows": Workflow.objects.order_by("slug").values_list("slug", flat=True),
        "nav": "deadletters",
    }
    return fragment_or_page(
        request, "monitoring/deadletters.html", "monitoring/fragments/deadletters_list.html", context
    )


@require_GET
@requires("view")
def deadletter_detail(request: HttpRequest, letter_id: int) -> HttpResponse:
    letter = get_object_or_404(
        DeadLetter.objects.select_related("run__workflow", "node_run", "resolved_by"), pk=letter_id
    )
    attempts = RunEvent.objects.filter(run_id=letter.run_id, node_id=letter.node_id).order_by("id")
    audit = AuditEntry.objects.filter(target_type="deadletter", target_id=str(letter.pk)).order_by("-id")
    context = {"letter": letter, "attempts": attempts, "audit": audit, "nav": "deadletters"}
    return render(request, "monitoring/deadletter.html", context)


@require_POST
@requires("replay")
def deadletter_replay(request: HttpRequest, letter_id: int) -> HttpResponse:
    """Replay as is, or with the edited input of the form's `input` field (JSON) if sent."""
    try:
        edited = edited_input(request.POST.get("input"))
        run = runs.replay_dead_letter(letter_id, request.user, edited)
        how = "with edited input" if edited is not None else "replayed"
        messages.success(request, f"Dead letter {letter_id} {how}: run {run.pk} is running again.")
    except DomainError as exc:
        messages.error(request, str(exc))
    return redirect("deadletter_detail", letter_id=letter_id)


def edited_input(text: str | None) -> Any:
    """The JSON of a replay form's input field; None when the field was not sent."""
    if text is None:
        return None
    try:
        value = texts.parse_json(text)
    except ValueError as exc:  # nesting past the recursion limit included
        raise Invalid(f"input is not valid JSON: {exc}; nothing was replayed.") from None
    bad = texts.first_bad_text(value)
    if bad is not None:
        where = texts.loc_path(("input", *bad))
        raise Invalid(
            f"{where} must not contain NUL characters or unpaired surrogates; nothing was replayed."
        )
    return value


@require_POST
@requires("discard")
def deadletter_discard(request: HttpRequest, letter_id: int) -> HttpResponse:
    try:
        runs.discard_dead_letter(letter_id, request.POST.get("reason", "")[:1000], request.user)
        messages.success(request, f"Dead letter {letter_id} discarded.")
    except DomainError as exc:
        messages.error(request, str(exc))
    return redirect("deadletter_detail", letter_id=letter_id)


@require_POST
@requires("replay")
def deadletters_bulk(request: HttpRequest) -> HttpResponse:
    """Replay or discard the selected letters, or every open letter matching the filter.

    "Matching" first answers with a confirmation page showing how many letters match; only
    the confirmed POST (which carries that count) acts, and it acts on at most MAX_BULK.
    """
    action = request.POST.get("action")
    if action not in ("replay", "discard"):
        return HttpResponse("action must be replay or discard.", status=400)
    if not access.can(request.user, action):
        raise PermissionDenied(f"Your role may not {action} dead letters.")
    reason = request.POST.get("reason", "").strip()[:1000]
    flt = LetterFilter.parse(request.POST)
    back = reverse("deadletters") + "?" + flt.query()
    if action == "discard" and not reason:
        messages.error(request, "Discarding needs a reason: say why these dead letters are dropped.")
        return redirect(back)
    if request.POST.get("scope") == "matching":
        letters: deadletters.LetterFilter | list[int] = letter_filter(flt)
        count = deadletters.matching(letters).count()
        if request.POST.get("confirmed") != str(count):
            context = {"action": action, "count": count, "filter": flt, "reason": reason, "max": MAX_BULK}
            return render(request, "monitoring/deadletters_confirm.html", {**context, "nav": "deadletters"})
    else:
        letters = [int(i) for i in request.POST.getlist("ids") if i.isdigit()][:MAX_BULK]
    result = deadletters.act_on_letters(action, letters, request.user, reason)
    if result.done:
        messages.success(
            request, f"{'Replayed' if action == 'replay' else 'Discarded'} {len(result.done)} dead letter(s)."
        )
    for refusal in result.refused[:5]:
        messages.error(request, refusal["reason"])
    if not (result.done or result.refused):
        messages.info(request, "No dead letter was selected.")
    return redirect(back)


def letter_filter(flt: LetterFilter) -> deadletters.LetterFilter:
    """The open letters the page's filter shows, on every page of the list."""
    return deadletters.LetterFilter(workflow=flt.workflow or None, run=flt.run, node_id=flt.node or None)
