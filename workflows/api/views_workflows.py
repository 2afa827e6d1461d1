"""Workflows: list, create, read, update, delete, pause, resume, export, import."""

from __future__ import annotations

from django.db.models import Q
from django.http import HttpResponse

from workflows import catalog, runs, versions
from workflows.api import serializers as s
from workflows.api.errors import issues_under
from workflows.api.pagination import paginate
from workflows.api.routing import Call, no_content, render
from workflows.errors import NotFound
from workflows.models import Workflow, WorkflowVersion


def list_workflows(call: Call) -> HttpResponse:
    """List workflows by slug; `q` searches slug and title."""
    q = call.query
    workflows = Workflow.objects.select_related("active_version")
    if q.q:
        workflows = workflows.filter(Q(slug__icontains=q.q) | Q(title__icontains=q.q))
    if q.paused is not None:
        workflows = workflows.filter(paused=q.paused)
    return render(paginate(workflows, q, "slug", s.workflow, descending=False))


def create_workflow(call: Call) -> HttpResponse:
    """Create an empty workflow; add a version to it next."""
    b = call.body
    workflow = catalog.create_workflow(b.slug, b.title, b.description, actor=call.key)
    return render(s.workflow(workflow), 201, {"Location": s.workflow(workflow)["url"]})


def get_workflow(call: Call, slug: str) -> HttpResponse:
    """Read a workflow."""
    return render(s.workflow(versions.get_workflow(slug)))


def update_workflow(call: Call, slug: str) -> HttpResponse:
    """Change a workflow's title or description."""
    changes = call.body.model_dump(exclude_none=True)
    workflow = catalog.update_workflow(versions.get_workflow(slug), changes, actor=call.key)
    return render(s.workflow(workflow))


def delete_workflow(call: Call, slug: str) -> HttpResponse:
    """Delete a workflow, its versions and its finished runs; refused (409) while runs are in flight."""
    catalog.delete_workflow(versions.get_workflow(slug), actor=call.key)
    return no_content()


def pause_workflow(call: Call, slug: str) -> HttpResponse:
    """Pause: new runs are recorded as waiting and none starts; runs in flight go on."""
    workflow = versions.get_workflow(slug)
    runs.pause_workflow(workflow, call.key)
    workflow.refresh_from_db()
    return render(s.workflow(workflow))


def resume_workflow(call: Call, slug: str) -> HttpResponse:
    """Resume: the waiting runs start, oldest first."""
    workflow = versions.get_workflow(slug)
    started = runs.resume_workflow(workflow, call.key)
    workflow.refresh_from_db()
    return render({"workflow": s.workflow(workflow), "started": started})


def export_workflow(call: Call, slug: str) -> HttpResponse:
    """Export a workflow with one version's definition (the active one by default)."""
    workflow = versions.get_workflow(slug)
    version = None
    if call.query.version is not None:
        version = WorkflowVersion.objects.filter(workflow=workflow, number=call.query.version).first()
        if version is None:
            raise NotFound(f"Workflow {slug!r} has no version {call.query.version}.")
    return render(versions.export_workflow(workflow, version))


def import_workflow(call: Call) -> HttpResponse:
    """Import an export: a new workflow, or a new version of the one with that slug."""
    data = call.body.model_dump()
    with issues_under("definition"):
        version = catalog.import_workflow(data, call.query.publish, actor=call.key)
    return render(s.version(version), 201, {"Location": s.version_summary(version)["url"]})
