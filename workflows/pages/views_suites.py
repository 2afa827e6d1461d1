"""The suites pages: a workflow's suites (create one from recent runs), one suite (its cases, upload
JSONL, add recent runs, require it to publish, run it) and a suite run's report (per case pass or
fail, what changed against its origin with a link to the comparison, cost; it refreshes itself
while the cases run).

Thin: each change is one call into `workflows.suites`, the API's own; a refused change re-renders
its page with the message beside the form (4xx), an accepted one redirects.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from controlplane import access
from monitoring.views.guards import requires
from workflows.core import callhash
from workflows.store.errors import DomainError, Forbidden
from workflows.store.models import Workflow, WorkflowVersion
from workflows.store.suites import Suite
from workflows.suites import building, reports, running

RECENT_DEFAULT = 20


def suites_context(workflow: Workflow, **extra: Any) -> dict[str, Any]:
    suites = workflow.suites.all()
    last = {s.pk: s.runs.select_related("version", "draft").first() for s in suites}
    rows = [{"suite": s, "cases": s.cases.count(), "last": last[s.pk]} for s in suites]
    return {"nav": "workflows", "workflow": workflow, "rows": rows, "recent_default": RECENT_DEFAULT, **extra}


@require_http_methods(["GET", "POST"])
@requires("view")
def suites_page(request: HttpRequest, slug: str) -> HttpResponse:
    """A workflow's suites; a POST (editors) creates one from its last N succeeded runs."""
    workflow = get_object_or_404(Workflow, slug=slug)
    if request.method == "GET":
        return render(request, "suites/suites.html", suites_context(workflow))
    return create_suite(request, workflow)


@requires("manage_suites")
def create_suite(request: HttpRequest, workflow: Workflow) -> HttpResponse:
    post = request.POST
    try:
        last = int(post.get("last") or 0)
        cases = [building.case_of_run(r) for r in building.recent_runs(workflow, last)] if last else []
        suite = building.create_suite(
            workflow,
            post.get("name", ""),
            post.get("description", ""),
            "required" in post,
            cases,
            request.user,
        )
    except (DomainError, ValueError) as exc:
        message = exc.message if isinstance(exc, DomainError) else "last: a number of runs."
        status = exc.http_status if isinstance(exc, DomainError) else 422
        return render(
            request, "suites/suites.html", suites_context(workflow, error=message, posted=post), status=status
        )
    messages.success(request, f"Suite {suite.name} created with {len(cases)} cases.")
    return redirect("suites:detail", slug=workflow.slug, suite_id=suite.pk)


def suite_context(suite: Suite, **extra: Any) -> dict[str, Any]:
    versions = suite.workflow.versions.order_by("-number").values("number", "status", "comment")[:30]
    return {
        "nav": "workflows",
        "workflow": suite.workflow,
        "suite": suite,
        "cases": suite.cases.all()[:500],
        "suite_runs": suite.runs.select_related("version", "draft")[:20],
        "versions": list(versions),
        "modes": callhash.MODES,
        "default_mode": running.DEFAULT_MODE,
        "recent_default": RECENT_DEFAULT,
        **extra,
    }


def suite_of(slug: str, suite_id: int) -> Suite:
    return get_object_or_404(Suite.objects.select_related("workflow"), pk=suite_id, workflow__slug=slug)


@require_GET
@requires("view")
def suite_page(request: HttpRequest, slug: str, suite_id: int) -> HttpResponse:
    return render(request, "suites/suite.html", suite_context(suite_of(slug, suite_id)))


def refused(request: HttpRequest, suite: Suite, exc: DomainError, form: str) -> HttpResponse:
    context = suite_context(suite, error=exc.message, error_form=form)
    return render(request, "suites/suite.html", context, status=exc.http_status)


@require_POST
@requires("manage_suites")
def add_cases(request: HttpRequest, slug: str, suite_id: int) -> HttpResponse:
    """Add the last N runs, or the cases of an uploaded JSONL file."""
    suite = suite_of(slug, suite_id)
    upload = request.FILES.get("jsonl")
    try:
        if upload is not None:
            # Read one character past the limit: parse_jsonl refuses it, naming the limit.
            text = upload.read(building.MAX_UPLOAD_CHARS * 4 + 4).decode("utf-8", errors="replace")
            made = building.upload(suite, text, request.user)
        else:
            made = building.add_runs(
                suite, building.recent_runs(suite.workflow, int(request.POST.get("last") or 0)), request.user
            )
    except DomainError as exc:
        return refused(request, suite, exc, "cases")
    except ValueError:
        return refused(request, suite, DomainError("last: a number of runs."), "cases")
    messages.success(request, f"{len(made)} cases added.")
    return redirect("suites:detail", slug=slug, suite_id=suite.pk)


@require_POST
@requires("manage_suites")
def require_suite(request: HttpRequest, slug: str, suite_id: int) -> HttpResponse:
    suite = building.set_required(suite_of(slug, suite_id), request.POST.get("required") == "1", request.user)
    state = "now required to publish" if suite.required_to_publish else "no longer required to publish"
    messages.success(request, f"Suite {suite.name} is {state}.")
    return redirect("suites:detail", slug=slug, suite_id=suite.pk)


@require_POST
@requires("run_suite")
def run_suite(request: HttpRequest, slug: str, suite_id: int) -> HttpResponse:
    """Run the suite on a version (or on the newest draft: editors)."""
    suite = suite_of(slug, suite_id)
    post = request.POST
    try:
        number, draft = target_of(post.get("target", "active"))
        target = running.target_version(suite, number, draft)
        if target.status == WorkflowVersion.DRAFT and not access.can(request.user, "publish"):
            raise Forbidden("Testing a draft freezes it into a snapshot: that needs the editor role.")
        suite_run = running.start_suite_run(suite, number, draft, post.get("mode") or None, request.user)
    except DomainError as exc:
        return refused(request, suite, exc, "run")
    return redirect("suites:report", suite_run_id=suite_run.pk)


def target_of(value: str) -> tuple[int | None, bool]:
    """The form's target: `active`, `draft` or a version number."""
    if value == "draft":
        return None, True
    if value.isdigit():
        return int(value), False
    return None, False


@require_GET
@requires("view")
def report_page(request: HttpRequest, suite_run_id: int) -> HttpResponse:
    """A suite run's report; htmx asks for its body alone every 2 s while it runs."""
    try:
        found = reports.report(suite_run_id)
    except DomainError as exc:
        return render(request, "404.html", {"message": exc.message}, status=exc.http_status)
    context = {
        "nav": "workflows",
        "report": found,
        "run": found.suite_run,
        "workflow": found.suite_run.suite.workflow,
    }
    if request.headers.get("HX-Request"):
        return render(request, "suites/report_body.html", context)
    return render(request, "suites/report.html", context)
