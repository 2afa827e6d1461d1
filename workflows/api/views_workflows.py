"""Workflows: list, create, read, update, delete, pause, resume, export, import."""

from __future__ import annotations

from typing import Annotated, Any

from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from ninja import Path, Query, Router, Status

from workflows.api import inputs as i, serializers as s
from workflows.api.auth import ApiRequest, allowed
from workflows.api.errors import issues_under
from workflows.api.pagination import paginate
from workflows.api.schema import refuses
from workflows.runs import actions as runs
from workflows.store.errors import NotFound
from workflows.store.models import Workflow, WorkflowVersion
from workflows.versions import catalog, publish as versions

router = Router(tags=["workflows"])
SlugPath = Annotated[str, Path(pattern=i.SLUG_PATTERN)]


@router.get("/workflows", response=s.WorkflowPage, auth=allowed("view"), summary="List workflows")
def list_workflows(request: HttpRequest, q: Query[i.WorkflowQuery]) -> Any:
    """List workflows by slug; `q` searches slug and title."""
    workflows = Workflow.objects.select_related("active_version")
    if q.q:
        workflows = workflows.filter(Q(slug__icontains=q.q) | Q(title__icontains=q.q))
    if q.paused is not None:
        workflows = workflows.filter(paused=q.paused)
    return paginate(workflows, q, "slug", s.workflow, descending=False)


@router.post("/workflows", response={201: s.WorkflowOut}, auth=allowed("edit"), summary="Create a workflow")
@refuses(409)
def create_workflow(request: ApiRequest, response: HttpResponse, body: i.WorkflowCreate) -> Any:
    """Create an empty workflow; add a version to it next."""
    workflow = catalog.create_workflow(body.slug, body.title, body.description, actor=request.auth)
    data = s.workflow(workflow)
    response["Location"] = data["url"]
    return Status(201, data)


@router.get("/workflows/{slug:slug}", response=s.WorkflowOut, auth=allowed("view"), summary="Read a workflow")
@refuses(404)
def get_workflow(request: HttpRequest, slug: SlugPath) -> Any:
    """Read a workflow."""
    return s.workflow(versions.get_workflow(slug))


@router.patch(
    "/workflows/{slug:slug}",
    response=s.WorkflowOut,
    auth=allowed("edit"),
    summary="Update a workflow's title, description or default priority",
)
@refuses(404)
def update_workflow(request: ApiRequest, slug: SlugPath, body: i.WorkflowUpdate = i.EMPTY_UPDATE) -> Any:
    """Change a workflow's title, description or the default priority of its runs."""
    changes = body.model_dump(exclude_none=True)
    workflow = catalog.update_workflow(versions.get_workflow(slug), changes, actor=request.auth)
    return s.workflow(workflow)


@router.delete(
    "/workflows/{slug:slug}",
    response={204: None},
    auth=allowed("delete_workflow"),
    summary="Delete a workflow",
)
@refuses(404, 409)
def delete_workflow(request: ApiRequest, slug: SlugPath) -> Any:
    """Delete a workflow, its versions and its finished runs; refused (409) while runs are in flight."""
    catalog.delete_workflow(versions.get_workflow(slug), actor=request.auth)
    return Status(204, None)


@router.post(
    "/workflows/{slug:slug}/pause",
    response=s.WorkflowOut,
    auth=allowed("pause_workflow"),
    summary="Pause a workflow",
)
@refuses(404)
def pause_workflow(request: ApiRequest, slug: SlugPath) -> Any:
    """Pause: new runs are recorded as waiting and none starts; runs in flight go on."""
    workflow = versions.get_workflow(slug)
    runs.pause_workflow(workflow, request.auth)
    workflow.refresh_from_db()
    return s.workflow(workflow)


@router.post(
    "/workflows/{slug:slug}/resume",
    response=s.ResumeOut,
    auth=allowed("pause_workflow"),
    summary="Resume a workflow",
)
@refuses(404)
def resume_workflow(request: ApiRequest, slug: SlugPath) -> Any:
    """Resume: the waiting runs start, oldest first."""
    workflow = versions.get_workflow(slug)
    started = runs.resume_workflow(workflow, request.auth)
    workflow.refresh_from_db()
    return {"workflow": s.workflow(workflow), "started": started}


@router.get(
    "/workflows/{slug:slug}/export", response=s.ExportOut, auth=allowed("view"), summary="Export a workflow"
)
@refuses(404)
def export_workflow(request: HttpRequest, slug: SlugPath, q: Query[i.ExportQuery]) -> Any:
    """Export a workflow with one version's definition (the active one by default)."""
    workflow = versions.get_workflow(slug)
    version = None
    if q.version is not None:
        version = WorkflowVersion.objects.filter(workflow=workflow, number=q.version).first()
        if version is None:
            raise NotFound(f"Workflow {slug!r} has no version {q.version}.")
    return versions.export_workflow(workflow, version)


@router.post(
    "/workflow-imports",
    response={201: s.VersionOut},
    auth=allowed("edit"),
    summary="Import a workflow export",
)
@refuses(409)
def import_workflow(
    request: ApiRequest, response: HttpResponse, body: i.ImportIn, q: Query[i.ImportQuery]
) -> Any:
    """Import an export: a new workflow, or a new version of the one with that slug."""
    with issues_under("definition"):
        version = catalog.import_workflow(body.model_dump(), q.publish, actor=request.auth)
    response["Location"] = s.version_summary(version)["url"]
    return Status(201, s.version(version))
