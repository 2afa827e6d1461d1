"""Pages of the operator dashboard: thin views, one call into the domain each.

Every page renders its live parts with fragment templates; the same templates answer an
htmx GET of the fragment (a re-sync) and are what the broadcaster or the consumer push over
the websocket. Actions are POSTs with CSRF, allowed by controlplane.access, carried out by
workflows.runs; a refused domain call is shown as a message, never a 500.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from monitoring.services import charts, flowfigures, runstate, snapshots
from monitoring.views import HtmxRequest, forks
from monitoring.views.guards import requires
from workflows.llm import usage
from workflows.runs import actions as runs, mapitems
from workflows.schedules import timetable as schedules
from workflows.store.errors import DomainError, NotFound
from workflows.store.graphs import load_graph
from workflows.store.models import AuditEntry, NodeRun, Run, RunEvent, Workflow
from workflows.versions import editing

OVERVIEW_FRAGMENTS = {
    "workflows": "monitoring/fragments/overview_workflows.html",
    "system": "monitoring/fragments/overview_system.html",
}


def liveness(request: HtmxRequest) -> JsonResponse:
    """Answer 200 while the web process can serve requests."""
    return JsonResponse({"status": "ok"})


def fragment_or_page(request: HtmxRequest, page: str, fragment: str, context: dict[str, Any]) -> HttpResponse:
    """Render the fragment for an htmx request, the whole page otherwise."""
    return render(request, fragment if request.htmx else page, context)


# --------------------------------------------------------------------------- overview, workers


@require_GET
@requires("view")
def overview(request: HtmxRequest) -> HttpResponse:
    message = snapshots.current("overview")
    name = OVERVIEW_FRAGMENTS.get(request.GET.get("fragment", ""))
    if request.htmx and name:
        return render(request, name, {"snap": message["data"]})
    context = {"snap": message["data"], "chart_windows": charts.WINDOW_LABELS.items(), "nav": "overview"}
    context |= usage.card_context() | {"busiest": flowfigures.busiest_keys()}
    return render(request, "monitoring/overview.html", context)


@require_GET
@requires("view")
def workers(request: HtmxRequest) -> HttpResponse:
    snap = snapshots.current("workers")["data"]
    context = {"snap": snap, "nav": "workers"}
    return fragment_or_page(
        request, "monitoring/workers.html", "monitoring/fragments/workers_tables.html", context
    )


# --------------------------------------------------------------------------- workflows


@require_GET
@requires("view")
def workflow_live(request: HtmxRequest, slug: str) -> HttpResponse:
    workflow = get_object_or_404(Workflow.objects.select_related("active_version"), slug=slug)
    version = workflow.active_version
    graph = graph_of(version.definition) if version else {"nodes": [], "edges": []}
    stats = snapshots.current(f"workflow:{workflow.pk}")["data"] if version else {"nodes": {}}
    context = {
        "workflow": workflow,
        "version": version,
        "graph": graph,
        "stats": stats,
        "rows": schedules.overview(workflow),
        "chart_windows": charts.WINDOW_LABELS.items(),
        "nav": "workflows",
    }
    return render(
        request,
        "monitoring/workflow_live.html",
        {**context, **usage.card_context(workflow), **flow_context(workflow)},
    )


@require_GET
@requires("view")
def busiest_keys(request: HtmxRequest) -> HttpResponse:
    """The overview's card of the busiest concurrency keys over every workflow (polled)."""
    return render(request, "monitoring/fragments/busiest_keys.html", {"busiest": flowfigures.busiest_keys()})


@require_GET
@requires("view")
def workflow_flow_keys(request: HtmxRequest, slug: str) -> HttpResponse:
    """The per-key figures of a workflow (its live page polls this fragment)."""
    workflow = get_object_or_404(Workflow, slug=slug)
    return render(request, "monitoring/fragments/flow_keys.html", flow_context(workflow))


def flow_context(workflow: Workflow) -> dict[str, Any]:
    graph = load_graph(workflow.active_version_id) if workflow.active_version_id else None
    return {"workflow": workflow, **flowfigures.card_context(workflow.pk, graph)}


@require_GET
@requires("view")
def workflow_node(request: HtmxRequest, slug: str, node_id: str) -> HttpResponse:
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
def run_detail(request: HtmxRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("workflow", "version"), pk=run_id)
    ctx = runstate.load(run, request.user)
    audit = AuditEntry.objects.filter(target_type="run", target_id=str(run.pk)).order_by("-id")[:50]
    context = {
        **ctx,
        "graph": graph_of(run.version.definition),
        "live": runstate.live_data(ctx),
        "test_run": editing.is_snapshot(run.version),
        "audit": audit,
        "forking": forks.fork_context(run, request.user),
        "nav": "runs",
    }
    return render(request, "monitoring/run.html", context)


@require_GET
@requires("view")
def run_node(request: HtmxRequest, run_id: int, node_id: str) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("workflow", "version"), pk=run_id)
    try:
        context = runstate.node_detail(run, node_id)
    except NodeRun.DoesNotExist:
        raise Http404(f"Run {run_id} has no node {node_id!r}.") from None
    return render(request, "monitoring/fragments/run_node.html", context)


@require_GET
@requires("view")
def run_node_steps(request: HtmxRequest, run_id: int, node_id: str) -> HttpResponse:
    """An agent node's step timeline: the node panel polls it while the node runs."""
    run = get_object_or_404(Run.objects.select_related("version"), pk=run_id)
    node = get_object_or_404(NodeRun, run=run, node_id=node_id)
    context = runstate.agent_steps(run, node)
    # The last poll: the node has ended, so the whole panel (status, output) is loaded again.
    context["finished_now"] = not context.get("polling")
    return render(request, "monitoring/fragments/agent_steps.html", context)


def run_node_items(request: HtmxRequest, run_id: int, node_id: str) -> HttpResponse:
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
def run_cancel(request: HtmxRequest, run_id: int) -> HttpResponse:
    try:
        runs.cancel_run(run_id, request.POST.get("reason", "").strip()[:500], request.user)
        messages.success(request, f"Run {run_id} cancelled.")
    except DomainError as exc:
        messages.error(request, str(exc))
    return redirect("run_detail", run_id=run_id)
