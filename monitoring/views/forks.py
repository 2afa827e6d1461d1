"""The fork form of a run (a dialog on the run page, a page of its own when refused), the
fork links the run page shows, and the comparison page of two runs.

Thin: the fork is `workflows.forks.forking`, the comparison `workflows.forks.comparison`. A fork that is started sends the browser to the
new run; a refused one answers the form again, with the domain's message and its status
(404, 422), the person's choices kept.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from controlplane import access
from monitoring.views.guards import requires
from workflows.forks import comparison, forking
from workflows.store.errors import DomainError, Invalid, NotFound
from workflows.store.graphs import load_graph
from workflows.store.models import Run


def fork_context(run: Run, user: Any) -> dict[str, Any]:
    """What the run page shows about forks: its origin, its forks, the versions a fork may take."""
    return {
        "origin": forking.origin_of(run.pk),
        "forks": forking.forks_of(run.pk),
        "can_fork": access.can(user, "fork_run"),
        "versions": version_choices(run, user),
        "nodes": list(load_graph(run.version_id).order),
        "modes": MODES,
        "chosen": {"node": "", "version": "", "input": "", "calls": "live"},
    }


MODES = [
    ("live", "live: every call is made again"),
    ("recorded", "recorded: replay this run's calls, fail a call it never made"),
    ("recorded-then-live", "recorded, then live: replay identical calls, make new ones live"),
]


def version_choices(run: Run, user: Any) -> list[dict[str, Any]]:
    """The versions a person may fork onto, newest first: published ones, and drafts for editors."""
    drafts = access.can(user, "publish")
    rows = run.workflow.versions.order_by("-number").only("number", "status", "comment")
    return [
        {
            "number": v.number,
            "status": v.status,
            "is_run_version": v.pk == run.version_id,
            "is_test_version": v.is_test_version,
        }
        for v in rows
        if v.is_published or drafts
    ]


@require_http_methods(["GET", "POST"])
@requires("fork_run")
def run_fork(request: HttpRequest, run_id: int) -> HttpResponse:
    """The fork form (GET), or start the fork (POST) and go to the new run."""
    run = get_object_or_404(Run.objects.select_related("workflow", "version"), pk=run_id)
    chosen = {
        "node": request.POST.get("node", request.GET.get("node", ""))[:64],
        "version": request.POST.get("version", "")[:20],
        "input": request.POST.get("input", "")[:100_000],
        "calls": request.POST.get("calls", "live")[:20],
    }
    if request.method == "GET":
        return form(request, run, chosen)
    try:
        number, edited = parse_version(chosen["version"]), parse_input(chosen["input"])
        if forking.is_onto_draft(run.pk, number) and not access.can(request.user, "publish"):
            raise PermissionDenied(
                "Forking onto a draft freezes it into a version: it needs the editor role."
            )
        fork = forking.fork_run(run.pk, chosen["node"], number, edited, request.user, chosen["calls"])
    except DomainError as exc:
        return form(request, run, chosen, exc)
    messages.success(request, f"Run {fork.pk} forks run {run.pk} at {chosen['node']}.")
    return redirect("run_detail", run_id=fork.pk)


def form(
    request: HttpRequest, run: Run, chosen: dict[str, str], error: DomainError | None = None
) -> HttpResponse:
    context = {
        "run": run,
        "nodes": list(load_graph(run.version_id).order),
        "versions": version_choices(run, request.user),
        "chosen": chosen,
        "modes": MODES,
        "error": error,
        "nav": "runs",
    }
    return render(request, "monitoring/run_fork.html", context, status=error.http_status if error else 200)


def parse_version(text: str) -> int | None:
    """The version number chosen ("": the run's own)."""
    text = text.strip()
    if not text:
        return None
    if not text.isdigit() or len(text) > 18:
        raise Invalid(f"version: {text!r} is not a version number.")
    return int(text)


def parse_input(text: str) -> Any:
    """The edited input typed in ("": none, the run's input)."""
    if not text.strip():
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise Invalid(f"input: not JSON ({exc}); give a JSON object, or leave it empty.") from None
    if not isinstance(value, dict):
        raise Invalid("input: must be a JSON object, or empty for the run's own input.")
    return value


@require_GET
@requires("view")
def runs_compare(request: HttpRequest, run_id: int, other_id: int) -> HttpResponse:
    """Two runs of a workflow side by side; `?changed=1` lists only the nodes that differ."""
    try:
        cmp = comparison.compare_runs(run_id, other_id)
    except NotFound as exc:
        raise Http404(exc.message) from None
    except DomainError as exc:
        return render(
            request, "monitoring/runs_compare.html", {"error": exc, "nav": "runs"}, status=exc.http_status
        )
    only_changed = request.GET.get("changed") == "1"
    nodes = [n for n in cmp.nodes if n.verdict != "same"] if only_changed else cmp.nodes
    context = {"cmp": cmp, "nodes": nodes, "only_changed": only_changed, "nav": "runs"}
    return render(request, "monitoring/runs_compare.html", context)


@require_GET
@requires("view")
def run_node_calls(request: HttpRequest, run_id: int, node_id: str) -> HttpResponse:
    """A node's recorded LLM, tool and HTTP calls, each by its request hash (the node panel loads it)."""
    get_object_or_404(Run, pk=run_id)
    context = {"calls": forking.calls_of(run_id, node_id[:64])}
    return render(request, "monitoring/fragments/node_calls.html", context)
