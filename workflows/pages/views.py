"""The workflow pages: list (and create), the editor's canvas, the diff and the history.

Thin by design: authorize with ``controlplane.access``, parse, make one call into the
domain (``catalog``, ``editing``, ``versions``), render. Pages need a login and at least the
viewer role. The canvas script talks to /api/v1 with the session (the one error format,
problem+json, and the one concurrency token, a version's ETag sent back as If-Match):
``editor_config`` hands it the API's root, the CSRF token it sends as ``X-CSRFToken`` and
what the person may do, so it offers only what the API will accept.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Min, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.middleware.csrf import get_token
from django.shortcuts import redirect, render
from django.urls import reverse

from controlplane import access
from workflows.core.engine import JOINS
from workflows.core.graph import DEFAULT_JOIN
from workflows.core.graphexport import export_graph
from workflows.store.errors import Conflict, NotFound
from workflows.store.models import TEST_VERSION_PREFIX, Workflow
from workflows.templatetags.start_run import dialog_config
from workflows.versions import catalog, editing, publish as versions

View = Callable[..., HttpResponse]
NAV = "workflows"  # highlights the top bar's Workflows link (templates/base.html)
ACTION_WORDS = {
    "view": "look at workflows",
    "start_run": "start runs",
    "edit": "change workflows",
    "publish": "publish or activate versions",
}


# --------------------------------------------------------------------------- plumbing


def page(action: str = "view") -> Callable[[View], View]:
    """Require a login (redirect) and the role for ``action`` (403 page) on an HTML view."""

    def decorate(view: View) -> View:
        @login_required
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not access.can(request.user, action):
                raise PermissionDenied(refusal(request, action))
            try:
                return view(request, *args, **kwargs)
            except NotFound as exc:
                raise Http404(exc.message) from None

        return wrapper

    return decorate


def refusal(request: HttpRequest, action: str) -> str:
    role = access.role_of(request.user) or "no role"
    return f"Your role ({role}) may not {ACTION_WORDS.get(action, action)}; ask an admin for access."


def query_int(request: HttpRequest, key: str) -> int | None:
    raw = request.GET.get(key, "")
    if not raw:
        return None
    if not raw.isdigit():
        raise NotFound(f"{key} must be a version number, not {raw!r}.")
    return int(raw)


# --------------------------------------------------------------------------- pages


class NewWorkflowForm(forms.Form):
    slug = forms.SlugField(
        max_length=100, help_text="Letters, digits, '-' and '_'; used in URLs and the API."
    )
    title = forms.CharField(max_length=200)

    def clean_slug(self) -> str:
        slug: str = self.cleaned_data["slug"]
        if Workflow.objects.filter(slug=slug).exists():
            raise forms.ValidationError(f"A workflow with slug {slug!r} already exists: choose another.")
        return slug


@page("view")
def workflow_list(request: HttpRequest) -> HttpResponse:
    """List workflows; an editor can create one (POST) and lands on its empty canvas."""
    form = NewWorkflowForm(request.POST or None)
    if request.method == "POST":
        if not access.can(request.user, "edit"):
            raise PermissionDenied(refusal(request, "edit"))
        if form.is_valid():
            slug, title = form.cleaned_data["slug"], form.cleaned_data["title"]
            try:
                catalog.create_workflow(slug, title, actor=request.user)
            except Conflict as exc:  # the same slug, created a moment ago by someone else
                form.add_error("slug", exc.message)
            else:
                return redirect("editor:edit", slug=slug)
    query = request.GET.get("q", "").strip()[:100]
    workflows = (
        catalog.matching_workflows(query)
        .select_related("active_version")
        .annotate(
            next_fire=Min("schedules__next_fire_at", filter=Q(schedules__enabled=True)),
            schedule_count=Count("schedules"),
        )
        .order_by("slug")
    )
    context = {
        "workflows": workflows,
        "query": query,
        "form": form,
        "can_edit": access.can(request.user, "edit"),
        "nav": NAV,
    }
    return render(request, "editor/list.html", context, status=400 if form.errors else 200)


@page("view")
def editor_page(request: HttpRequest, slug: str) -> HttpResponse:
    """Show the canvas on one version (``?version=N``; by default the one to work on)."""
    workflow = versions.get_workflow(slug)
    number = query_int(request, "version")
    version = editing.get_version(workflow, number) if number else editing.version_to_open(workflow)
    config = editor_config(request, workflow, mode="edit", version=version.number if version else None)
    context = {"workflow": workflow, "config": config, "mode": "edit", "nav": NAV}
    return render(request, "editor/editor.html", context)


@page("view")
def diff_page(request: HttpRequest, slug: str) -> HttpResponse:
    """Show two versions on one canvas (added, removed, changed) and as a list."""
    workflow = versions.get_workflow(slug)
    numbers = list(workflow.versions.order_by("-number").values_list("number", flat=True))
    if len(numbers) < 2:
        raise Http404(f"Workflow {slug!r} has fewer than two versions to compare.")
    old = query_int(request, "from") or numbers[1]
    new = query_int(request, "to") or numbers[0]
    for number in (old, new):
        editing.get_version(workflow, number)  # NotFound (404) before rendering
    config = editor_config(request, workflow, mode="diff", diff={"from": old, "to": new})
    context = {
        "workflow": workflow,
        "config": config,
        "mode": "diff",
        "numbers": numbers,
        # Versions frozen from a draft for a test run: labelled "(test)" in the pickers.
        "test_numbers": {
            v.number for v in workflow.versions.filter(comment__startswith=TEST_VERSION_PREFIX).only("number")
        },
        "old": old,
        "new": new,
    }
    return render(request, "editor/editor.html", context)


@page("view")
def history_page(request: HttpRequest, slug: str) -> HttpResponse:
    """List every version of a workflow: who, when, comment, status; pick two to compare."""
    workflow = versions.get_workflow(slug)
    rows = workflow.versions.select_related("created_by").order_by("-number")
    history = [
        {**editing.version_summary(v, workflow.active_version_id), "created": v.created_at} for v in rows
    ]
    return render(request, "editor/history.html", {"workflow": workflow, "history": history, "nav": NAV})


GRAPH_FORMATS = {"mmd": "mermaid", "dot": "dot"}  # a download's extension -> graphexport's format


@page("view")
def graph_download(request: HttpRequest, slug: str, number: int, ext: str) -> HttpResponse:
    """Download a version's graph as Mermaid (.mmd) or Graphviz DOT (.dot): the API's text."""
    if ext not in GRAPH_FORMATS:
        raise Http404(f"Export as .mmd (Mermaid) or .dot (Graphviz), not .{ext[:20]}.")
    version = editing.get_version(versions.get_workflow(slug), number)
    text = export_graph(version.definition, GRAPH_FORMATS[ext], f"{slug} v{number}")
    response = HttpResponse(text, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{slug}-v{number}.{ext}"'
    return response


def editor_config(request: HttpRequest, workflow: Workflow, **extra: Any) -> dict[str, Any]:
    """Return what the canvas script needs; the template hands it over with json_script."""
    user = request.user
    slug = workflow.slug
    return {
        "slug": slug,
        "title": workflow.title,
        "activeNumber": workflow.active_version.number if workflow.active_version else None,
        "csrfToken": get_token(request),
        "user": user.get_username(),
        "role": access.role_of(user),
        "can": {
            "edit": access.can(user, "edit"),
            "publish": access.can(user, "publish"),
            "run": access.can(user, "start_run"),
            "runSuite": access.can(user, "run_suite"),
        },
        "palette": editing.palette(),
        "workflows": editing.child_choices(workflow),
        "queues": list(settings.SWITCHYARD_QUEUES),
        "joinRules": [{"name": rule, "help": join.__doc__ or ""} for rule, join in JOINS.items()],
        "defaultJoin": DEFAULT_JOIN,
        "maxNodes": versions.limits().max_nodes,
        "urls": {
            "list": reverse("editor:list"),
            "editor": reverse("editor:edit", args=[slug]),
            "diffPage": reverse("editor:diff", args=[slug]),
            "historyPage": reverse("editor:history", args=[slug]),
            "suitesPage": reverse("suites:list", args=[slug]),
        },
        # The script builds /api/v1 paths from these two (static/editor/src/api.js).
        "api": {
            "workflow": reverse("api-v1:get_workflow", kwargs={"slug": slug}),
            "runs": reverse("api-v1:list_runs"),
        },
        "startRun": dialog_config(request),
        **extra,
    }
