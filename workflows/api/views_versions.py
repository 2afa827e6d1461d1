"""Versions: drafts with optimistic concurrency, publish, activate, diff, validate; handlers."""

from __future__ import annotations

import re
from typing import Annotated, Any

from django.http import HttpRequest, HttpResponse
from ninja import Header, Path, Query, Router, Status

from workflows import handlers
from workflows.api import inputs as i, serializers as s
from workflows.api.auth import ApiRequest, allowed
from workflows.api.errors import ApiError, FieldError, issues_under
from workflows.api.parsing import MAX_ID
from workflows.api.schema import answers_as, refuses
from workflows.children import calls
from workflows.core.definition import template_warnings, validate_definition
from workflows.core.diff import diff_definitions
from workflows.core.graphexport import export_graph
from workflows.store.errors import NotFound
from workflows.store.models import WorkflowVersion
from workflows.versions import catalog, drafts, publish as versions, samples

router = Router(tags=["versions"])
ETAG = re.compile(r'^"(\d{1,18})-(\d{1,9})"$')
SlugPath = Annotated[str, Path(pattern=i.SLUG_PATTERN)]
NumberPath = Annotated[int, Path(ge=1, le=MAX_ID)]
VERSION = "/workflows/{slug:slug}/versions/{id:number}"


def get_version(slug: str, number: int) -> WorkflowVersion:
    try:
        return WorkflowVersion.objects.select_related("workflow", "created_by").get(
            workflow__slug=slug, number=number
        )
    except WorkflowVersion.DoesNotExist:
        versions.get_workflow(slug)  # 404 for the workflow first, when it is the one missing
        raise NotFound(f"Workflow {slug!r} has no version {number}.") from None


def with_etag(response: HttpResponse, v: WorkflowVersion, status: int = 200) -> Any:
    data = s.version(v)
    response["ETag"] = data["etag"]
    if status == 201:
        response["Location"] = data["url"]
    return Status(status, data)


@router.get(
    "/workflows/{slug:slug}/versions",
    response=s.VersionList,
    auth=allowed("view"),
    summary="List a workflow's versions",
)
@refuses(404)
def list_versions(request: HttpRequest, slug: SlugPath) -> Any:
    """List a workflow's versions, newest first (without their definitions)."""
    workflow = versions.get_workflow(slug)
    rows = WorkflowVersion.objects.filter(workflow=workflow).select_related("workflow", "created_by")
    return {"items": [s.version_summary(v) for v in rows.order_by("-number")]}


@router.post(
    "/workflows/{slug:slug}/versions",
    response={201: s.VersionOut},
    auth=allowed("edit"),
    summary="Create a draft version",
)
@refuses(404)
def create_version(request: ApiRequest, response: HttpResponse, slug: SlugPath, body: i.DraftCreate) -> Any:
    """Save a definition as the workflow's next draft; every invalid field is reported."""
    workflow = versions.get_workflow(slug)
    with issues_under("definition"):
        version = catalog.create_draft(workflow, body.definition, body.comment, actor=request.auth)
    return with_etag(response, get_version(slug, version.number), 201)


@router.get(VERSION, response=s.VersionOut, auth=allowed("view"), summary="Read a version")
@refuses(404)
def read_version(request: HttpRequest, response: HttpResponse, slug: SlugPath, number: NumberPath) -> Any:
    """Read a version with its definition; its ETag is the token for If-Match."""
    return with_etag(response, get_version(slug, number))


GRAPH_SCHEMA = {
    "type": "string",
    "description": "The graph as a Mermaid flowchart (format=mermaid) or a Graphviz digraph (format=dot).",
}


@router.get(
    VERSION + "/graph",
    response={200: None},
    auth=allowed("view"),
    summary="Export a version's graph as Mermaid or Graphviz DOT",
)
@answers_as("text/plain", GRAPH_SCHEMA)
@refuses(404)
def export_version_graph(
    request: HttpRequest, slug: SlugPath, number: NumberPath, q: Query[i.GraphQuery]
) -> Any:
    """The version's graph as text: each node's id, kind and handler, edge conditions as labels.

    Drafts too, valid or not. Paste Mermaid into a Markdown file or mermaid.live; render DOT
    with `dot -Tsvg`."""
    version = get_version(slug, number)
    text = export_graph(version.definition, q.format, f"{slug} v{number}")
    return HttpResponse(text, content_type="text/plain; charset=utf-8")


@router.put(
    VERSION, response=s.VersionOut, auth=allowed("edit"), summary="Update a draft (optimistic concurrency)"
)
@refuses(404, 409, 412, 428)
def update_version(
    request: ApiRequest,
    response: HttpResponse,
    slug: SlugPath,
    number: NumberPath,
    body: i.DraftUpdate,
    if_match: Annotated[i.IfMatch, Header(alias="If-Match")],
) -> Any:
    """Replace a draft's definition; If-Match must carry the ETag it was read with (412 if stale)."""
    version = get_version(slug, number)
    revision = based_on(if_match, version)
    try:
        with issues_under("definition"):
            catalog.update_draft(version, body.definition, revision, body.comment, actor=request.auth)
    except drafts.StaleRevision as exc:
        current = get_version(slug, number)
        raise ApiError(
            412, exc.message, headers={"ETag": drafts.etag(current)}, extra={"current": s.version(current)}
        ) from None
    return with_etag(response, get_version(slug, number))


def based_on(if_match: str, version: WorkflowVersion) -> int:
    """Return the revision an If-Match names ("*" is the current one); 412 if it names another version."""
    if if_match.strip() == "*":
        return version.revision
    match = ETAG.match(if_match.strip())
    if match is None:
        message = 'must be the ETag of the version as read, like "12-3"'
        raise ApiError(400, f"If-Match {message}.", [FieldError("header", "If-Match", message)])
    if int(match[1]) != version.pk:
        # An ETag of another version can never match this one: treat it as stale.
        return -1
    return int(match[2])


@router.post(f"{VERSION}/publish", response=s.VersionOut, auth=allowed("publish"), summary="Publish a draft")
@refuses(404, 409)
def publish_version(
    request: ApiRequest,
    response: HttpResponse,
    slug: SlugPath,
    number: NumberPath,
    body: i.PublishIn = i.EMPTY_PUBLISH,
) -> Any:
    """Publish a draft (it becomes immutable) and, by default, make it active."""
    version = get_version(slug, number)
    with issues_under("definition"):
        catalog.publish(version, body.activate, actor=request.auth)
    return with_etag(response, get_version(slug, number))


@router.post(
    f"{VERSION}/activate",
    response=s.VersionOut,
    auth=allowed("publish"),
    summary="Activate a published version (roll back)",
)
@refuses(404, 409)
def activate_version(request: ApiRequest, response: HttpResponse, slug: SlugPath, number: NumberPath) -> Any:
    """Make a published version the one new runs use (a rollback when it is older)."""
    catalog.activate(get_version(slug, number), actor=request.auth)
    return with_etag(response, get_version(slug, number))


@router.get(
    "/workflows/{slug:slug}/diff", response=s.DiffOut, auth=allowed("view"), summary="Diff two versions"
)
@refuses(404)
def diff_versions(request: HttpRequest, slug: SlugPath, q: Query[i.DiffQuery]) -> Any:
    """Compare two versions: nodes and edges added, removed and changed, field by field."""
    old = get_version(slug, q.from_version)
    new = get_version(slug, q.to_version)
    diff = diff_definitions(old.definition, new.definition)
    return {
        "workflow": slug,
        "from_version": old.number,
        "to_version": new.number,
        "empty": diff.is_empty(),
        "diff": diff.as_dict(),
    }


@router.post(
    "/definitions/validate",
    response=s.ValidationOut,
    auth=allowed("edit"),
    summary="Validate a definition without saving it",
)
def validate(request: HttpRequest, body: i.ValidateIn) -> Any:
    """Validate a definition without saving it; every issue comes with its JSON path."""
    issues = validate_definition(body.definition, handlers.schemas(), versions.limits())
    return s.validation(issues + calls.call_issues(body.definition, None))


@router.post(
    "/workflows/{slug:slug}/validate",
    response=s.DefinitionCheck,
    auth=allowed("view"),
    summary="Check a definition for a workflow (structured problems)",
)
@refuses(404)
def check_definition(request: HttpRequest, slug: SlugPath, body: i.ValidateIn) -> Any:
    """Check a definition without saving it, as a save would: 200 either way. Each error is
    an item of a problem's `errors` (`code`, `node`, `field` in the definition, `cycle`'s node
    ids), so what the editor shows while drawing is what a refused save would say. Anyone who
    may look at the workflow may check (a viewer's canvas shows its problems too).
    `warnings` lists placeholders nothing is sure to provide (an undeclared `{input.X}`, an
    `{upstream.N.X}` whose N is not upstream or whose latest output has no X): not refused."""
    workflow = versions.get_workflow(slug)
    issues = validate_definition(body.definition, handlers.schemas(), versions.limits())
    warnings = template_warnings(body.definition, samples.known_outputs(workflow))
    return s.definition_check(issues + calls.call_issues(body.definition, workflow), warnings)


@router.get("/handlers", response=s.HandlerList, auth=allowed("view"), summary="List node handlers")
def list_handlers(request: HttpRequest) -> Any:
    """List the registered node handlers with their documentation and config schema."""
    return {"items": [s.handler(h) for h in handlers.registered().values()]}
