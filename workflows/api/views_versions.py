"""Versions: drafts with optimistic concurrency, publish, activate, diff, validate; handlers."""

from __future__ import annotations

import re

from django.http import HttpResponse

from workflows import catalog, drafts, handlers, versions
from workflows.api import serializers as s
from workflows.api.errors import ApiError, FieldError, issues_under
from workflows.api.routing import Call, render
from workflows.core.definition import validate_definition
from workflows.core.diff import diff_definitions
from workflows.errors import NotFound
from workflows.models import WorkflowVersion

ETAG = re.compile(r'^"(\d{1,18})-(\d{1,9})"$')


def get_version(slug: str, number: int) -> WorkflowVersion:
    try:
        return WorkflowVersion.objects.select_related("workflow", "created_by").get(
            workflow__slug=slug, number=number
        )
    except WorkflowVersion.DoesNotExist:
        versions.get_workflow(slug)  # 404 for the workflow first, when it is the one missing
        raise NotFound(f"Workflow {slug!r} has no version {number}.") from None


def with_etag(v: WorkflowVersion, status: int = 200) -> HttpResponse:
    data = s.version(v)
    headers = {"ETag": data["etag"]}
    if status == 201:
        headers["Location"] = data["url"]
    return render(data, status, headers)


def list_versions(call: Call, slug: str) -> HttpResponse:
    """List a workflow's versions, newest first (without their definitions)."""
    workflow = versions.get_workflow(slug)
    rows = WorkflowVersion.objects.filter(workflow=workflow).select_related("workflow", "created_by")
    return render({"items": [s.version_summary(v) for v in rows.order_by("-number")]})


def create_version(call: Call, slug: str) -> HttpResponse:
    """Save a definition as the workflow's next draft; every invalid field is reported."""
    workflow = versions.get_workflow(slug)
    with issues_under("definition"):
        version = catalog.create_draft(workflow, call.body.definition, call.body.comment, actor=call.key)
    return with_etag(get_version(slug, version.number), 201)


def read_version(call: Call, slug: str, number: int) -> HttpResponse:
    """Read a version with its definition; its ETag is the token for If-Match."""
    return with_etag(get_version(slug, number))


def update_version(call: Call, slug: str, number: int) -> HttpResponse:
    """Replace a draft's definition; If-Match must carry the ETag it was read with (412 if stale)."""
    version = get_version(slug, number)
    revision = based_on(call.headers["If-Match"], version)
    try:
        with issues_under("definition"):
            catalog.update_draft(version, call.body.definition, revision, call.body.comment, actor=call.key)
    except drafts.StaleRevision as exc:
        current = get_version(slug, number)
        raise ApiError(
            412, exc.message, headers={"ETag": drafts.etag(current)}, extra={"current": s.version(current)}
        ) from None
    return with_etag(get_version(slug, number))


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


def publish_version(call: Call, slug: str, number: int) -> HttpResponse:
    """Publish a draft (it becomes immutable) and, by default, make it active."""
    version = get_version(slug, number)
    with issues_under("definition"):
        catalog.publish(version, call.body.activate, actor=call.key)
    return with_etag(get_version(slug, number))


def activate_version(call: Call, slug: str, number: int) -> HttpResponse:
    """Make a published version the one new runs use (a rollback when it is older)."""
    catalog.activate(get_version(slug, number), actor=call.key)
    return with_etag(get_version(slug, number))


def diff_versions(call: Call, slug: str) -> HttpResponse:
    """Compare two versions: nodes and edges added, removed and changed, field by field."""
    old = get_version(slug, call.query.from_version)
    new = get_version(slug, call.query.to_version)
    diff = diff_definitions(old.definition, new.definition)
    return render(
        {
            "workflow": slug,
            "from_version": old.number,
            "to_version": new.number,
            "empty": diff.is_empty(),
            "diff": diff.as_dict(),
        }
    )


def validate(call: Call) -> HttpResponse:
    """Validate a definition without saving it; every issue comes with its JSON path."""
    issues = validate_definition(call.body.definition, handlers.schemas(), versions.limits())
    return render(s.validation(issues))


def list_handlers(call: Call) -> HttpResponse:
    """List the registered node handlers with their documentation and config schema."""
    return render({"items": [s.handler(h) for h in handlers.registered().values()]})
