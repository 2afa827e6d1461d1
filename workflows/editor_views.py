"""The browser editor: its pages and the JSON endpoints its canvas calls.

Thin by design: authorize with ``controlplane.access``, parse, make one call into the
domain (``catalog`` for changes, as the API does; ``editing``, ``versions``, ``graph``), answer. Pages need a login and at least the
viewer role; every JSON endpoint answers 401/403 as JSON instead of redirecting, and a
``DomainError`` becomes its own status with ``{"error", "issues"}``. Each issue is a
structured problem, ``{"code", "message", "node", "field"}`` and ``"cycle"`` (the node ids
along it) for a cycle: the shape of a problem+json ``errors`` item (``Issue.as_problem``). CSRF applies to every
POST (the page hands the token to the script, which sends it as ``X-CSRFToken``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import get_token
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from controlplane import access
from workflows import catalog, editing, handlers, texts, versions
from workflows.core.definition import Issue, validate_definition
from workflows.core.engine import JOINS
from workflows.core.graph import DEFAULT_JOIN
from workflows.drafts import StaleRevision
from workflows.errors import Conflict, DomainError, Invalid, NotFound
from workflows.models import Workflow

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


def endpoint(action: str, method: str = "GET") -> Callable[[View], View]:
    """Guard a JSON endpoint: method, login (401), role (403); map domain errors to JSON."""

    def decorate(view: View) -> View:
        @require_http_methods([method])
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                return error_response(401, "Your session has ended: log in again, then retry.")
            if not access.can(request.user, action):
                return error_response(403, refusal(request, action))
            try:
                return view(request, *args, **kwargs)
            except DomainError as exc:
                return domain_error_response(exc)

        return wrapper

    return decorate


def refusal(request: HttpRequest, action: str) -> str:
    role = access.role_of(request.user) or "no role"
    return f"Your role ({role}) may not {ACTION_WORDS.get(action, action)}; ask an admin for access."


class Forbidden(DomainError):
    http_status = 403


def ensure_can(request: HttpRequest, action: str) -> None:
    """Refuse (as a 403 DomainError) an action whose role depends on the request's data."""
    if not access.can(request.user, action):
        raise Forbidden(refusal(request, action))


def error_response(status: int, message: str, **extra: Any) -> JsonResponse:
    return JsonResponse({"error": message, "issues": [], **extra}, status=status)


def domain_error_response(exc: DomainError) -> JsonResponse:
    issues = [i.as_problem() for i in exc.issues]
    extra: dict[str, Any] = {}
    if isinstance(exc, StaleRevision):
        extra = {"code": "stale_revision", "current_revision": exc.current.revision}
    return JsonResponse({"error": exc.message, "issues": issues, **extra}, status=exc.http_status)


def read_json(request: HttpRequest) -> dict[str, Any]:
    """Return the request body as a JSON object; refuse anything else with a clear message."""
    try:
        data = texts.parse_json(request.body or b"{}")
    except ValueError as exc:  # nesting past the recursion limit included: a 422, not a 500
        raise Invalid(f"The request body is not valid JSON: {exc}.") from None
    if not isinstance(data, dict):
        raise Invalid("The request body must be a JSON object.")
    bad = texts.first_bad_text(data)
    if bad is not None:
        where, message = texts.loc_path(bad), "must not contain NUL characters or unpaired surrogates"
        raise Invalid(f"{where or 'The body'} {message}; nothing was saved.", [Issue(where, message)])
    return data


def optional_int(data: dict[str, Any], key: str) -> int | None:
    value = data.get(key)
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise Invalid(f"{key} must be a whole number or null, not {value!r}.")


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
        slug = self.cleaned_data["slug"]
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
    workflows = Workflow.objects.select_related("active_version").order_by("slug")
    context = {"workflows": workflows, "form": form, "can_edit": access.can(request.user, "edit"), "nav": NAV}
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


def editor_config(request: HttpRequest, workflow: Workflow, **extra: Any) -> dict[str, Any]:
    """Return what the canvas script needs; the template hands it over with json_script."""
    user = request.user
    slug = workflow.slug
    return {
        "slug": slug,
        "title": workflow.title,
        "csrfToken": get_token(request),
        "user": user.get_username(),
        "role": access.role_of(user),
        "can": {
            "edit": access.can(user, "edit"),
            "publish": access.can(user, "publish"),
            "run": access.can(user, "start_run"),
        },
        "palette": editing.palette(),
        "queues": list(settings.SWITCHYARD_QUEUES),
        "joinRules": [{"name": rule, "help": join.__doc__ or ""} for rule, join in JOINS.items()],
        "defaultJoin": DEFAULT_JOIN,
        "maxNodes": versions.limits().max_nodes,
        "urls": {
            "list": reverse("editor:list"),
            "editor": reverse("editor:edit", args=[slug]),
            "diffPage": reverse("editor:diff", args=[slug]),
            "historyPage": reverse("editor:history", args=[slug]),
            "history": reverse("editor:history-json", args=[slug]),
            "version": reverse("editor:version", args=[slug, 0]),
            "validate": reverse("editor:validate", args=[slug]),
            "save": reverse("editor:save", args=[slug]),
            "publish": reverse("editor:publish", args=[slug, 0]),
            "activate": reverse("editor:activate", args=[slug, 0]),
            "diff": reverse("editor:diff-json", args=[slug]),
            "testRun": reverse("editor:test-run", args=[slug]),
            "run": reverse("editor:run", args=[slug, 0]),
        },
        **extra,
    }


# --------------------------------------------------------------------------- JSON endpoints


@endpoint("view")
def history_json(request: HttpRequest, slug: str) -> JsonResponse:
    workflow = versions.get_workflow(slug)
    return JsonResponse({"versions": editing.version_history(workflow)})


@endpoint("view")
def version_json(request: HttpRequest, slug: str, number: int) -> JsonResponse:
    """Return a version's definition and the revision a save must name."""
    workflow = versions.get_workflow(slug)
    version = editing.get_version(workflow, number)
    return JsonResponse(editing.version_detail(version, workflow.active_version_id))


@endpoint("view", "POST")
def validate(request: HttpRequest, slug: str) -> JsonResponse:
    """Validate ``{"definition": ...}`` with the graph core the engine uses; 200 either way."""
    versions.get_workflow(slug)
    definition = read_json(request).get("definition")
    issues = validate_definition(definition, handlers.schemas(), versions.limits())
    return JsonResponse({"valid": not issues, "issues": [i.as_problem() for i in issues]})


@endpoint("edit", "POST")
def save(request: HttpRequest, slug: str) -> JsonResponse:
    """Save ``{"base", "revision", "definition", "comment"}``: update the draft or start one."""
    workflow = versions.get_workflow(slug)
    data = read_json(request)
    comment = data.get("comment") or ""
    if not isinstance(comment, str):
        raise Invalid("comment must be text.")
    version, created = editing.save_definition(
        workflow,
        optional_int(data, "base"),
        optional_int(data, "revision"),
        data.get("definition"),
        comment=comment,
        user=request.user,
    )
    # The summary only: the browser holds the definition it sent (2,000 nodes are ~0.2 MB).
    body = {**editing.version_summary(version, workflow.active_version_id), "created": created}
    return JsonResponse(body, status=201 if created else 200)


@endpoint("publish", "POST")
def publish(request: HttpRequest, slug: str, number: int) -> JsonResponse:
    """Publish a draft and make it active; runs in flight stay on their version."""
    workflow = versions.get_workflow(slug)
    version = catalog.publish(editing.get_version(workflow, number), actor=request.user)
    return JsonResponse(editing.version_summary(version, version.pk))


@endpoint("publish", "POST")
def activate(request: HttpRequest, slug: str, number: int) -> JsonResponse:
    """Make a published version active again (roll back or forward)."""
    workflow = versions.get_workflow(slug)
    version = catalog.activate(editing.get_version(workflow, number), actor=request.user)
    return JsonResponse(editing.version_summary(version, version.pk))


@endpoint("view")
def diff_json(request: HttpRequest, slug: str) -> JsonResponse:
    workflow = versions.get_workflow(slug)
    old, new = query_int(request, "from"), query_int(request, "to")
    if old is None or new is None:
        raise Invalid("Name both versions to compare: ?from=N&to=M.")
    return JsonResponse(editing.diff_versions(workflow, old, new))


@endpoint("start_run", "POST")
def test_run(request: HttpRequest, slug: str) -> JsonResponse:
    """Start a run of ``{"version", "input"}``; a draft is frozen first (editor role)."""
    workflow = versions.get_workflow(slug)
    data = read_json(request)
    number = optional_int(data, "version")
    if number is None:
        raise Invalid("version: say which version to run.")
    version = editing.get_version(workflow, number)
    if not version.is_published:
        ensure_can(request, "publish")
    run = editing.start_test_run(version, data.get("input", {}), user=request.user)
    return JsonResponse(editing.run_state(run), status=201)


@endpoint("view")
def run_state(request: HttpRequest, slug: str, run_id: int) -> JsonResponse:
    """Return a run's per-node states for the canvas (polled while the run is going)."""
    workflow = versions.get_workflow(slug)
    return JsonResponse(editing.run_state(editing.get_workflow_run(workflow, run_id)))
