"""Workflows and their versions: create, validate, publish, activate, import, export.

A published version is immutable (its definition and checksum never change), so every
process caches its parsed graph by version id forever. Publishing and activating commit
first and announce on Redis pub/sub after the commit; schedulers swap the new version in
without a restart, and runs in flight keep the version they were started on.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from workflows import handlers
from workflows.children import calls
from workflows.core.definition import DefinitionError, Limits, checksum, normalise, parse_definition
from workflows.core.graph import Graph
from workflows.handlers import egress
from workflows.llm import providers
from workflows.mcp import usage as mcpusage
from workflows.runtime import bus
from workflows.secrets import usage
from workflows.store import hotreads
from workflows.store.errors import Conflict, Invalid, NotFound
from workflows.store.models import Workflow, WorkflowVersion
from workflows.versions import gates

EXPORT_FORMAT = "switchyard.workflow/v1"


def limits() -> Limits:
    known = providers.known_providers()
    return Limits(
        max_nodes=settings.SWITCHYARD["MAX_NODES"],
        queues=tuple(settings.SWITCHYARD_QUEUES),
        llm_providers={p.name: tuple(p.models) for p in known},
        llm_default_provider=next((p.name for p in known if p.is_default), None),
        egress=egress.current_policy(),
    )


def parse(definition: Any, workflow: Workflow | None = None) -> Graph:
    """Parse and validate a definition against the registered handlers and, for `workflow`,
    its calls to other workflows (calls.py), the secrets it references (usage.py) and the MCP
    tools its agents offer (mcp/usage.py); raise Invalid."""
    try:
        graph = parse_definition(definition, handlers.schemas(), limits())
    except DefinitionError as exc:
        raise Invalid("The workflow definition is invalid.", issues=exc.issues) from None
    issues = calls.call_issues(definition, workflow) + usage.secret_issues(definition)
    issues += mcpusage.mcp_issues(definition)
    if issues:
        raise Invalid("The workflow definition is invalid.", issues=issues)
    return graph


def create_workflow(slug: str, title: str, description: str = "") -> Workflow:
    if Workflow.objects.filter(slug=slug).exists():
        raise Conflict(f"A workflow with slug {slug!r} already exists.")
    return Workflow.objects.create(slug=slug, title=title, description=description)


def create_version(
    workflow: Workflow, definition: Any, comment: str = "", user: Any = None
) -> WorkflowVersion:
    """Store a valid definition as the workflow's next draft version."""
    parse(definition, workflow)
    with transaction.atomic():
        Workflow.objects.select_for_update().get(pk=workflow.pk)
        number = (workflow.versions.aggregate(n=Max("number"))["n"] or 0) + 1
        return WorkflowVersion.objects.create(
            workflow=workflow,
            number=number,
            definition=normalise(definition),
            checksum=checksum(definition),
            comment=comment,
            created_by=user if user is not None and user.is_authenticated else None,
        )


def publish_version(version: WorkflowVersion, activate: bool = True) -> WorkflowVersion:
    """Freeze a draft (validated again: handlers and called workflows may have gone) and make it active."""
    parse(version.definition, version.workflow)
    gates.check_publish(version)
    with transaction.atomic():
        locked = WorkflowVersion.objects.select_for_update().get(pk=version.pk)
        if locked.is_published:
            raise Conflict(f"Version {locked.number} of {locked.workflow.slug} is already published.")
        locked.status = WorkflowVersion.PUBLISHED
        locked.published_at = timezone.now()
        locked.save(update_fields=["status", "published_at"])
        if activate:
            _activate(locked)
    return locked


def activate_version(version: WorkflowVersion) -> WorkflowVersion:
    """Make a published version the one new runs use (a rollback when it is older)."""
    if not version.is_published:
        raise Conflict(f"Version {version.number} is a draft: publish it before activating it.")
    issues = calls.call_issues(version.definition, version.workflow)
    if issues:
        raise Invalid(f"Version {version.number} cannot be activated.", issues=issues)
    with transaction.atomic():
        _activate(version)
    return version


def _activate(version: WorkflowVersion) -> None:
    Workflow.objects.filter(pk=version.workflow_id).update(active_version=version, updated_at=timezone.now())
    announcement = {"workflow": version.workflow_id, "version": version.pk, "number": version.number}
    transaction.on_commit(lambda: bus.publish(bus.VERSIONS_CHANNEL, announcement))


def get_workflow(slug: str) -> Workflow:
    try:
        return Workflow.objects.select_related("active_version").get(slug=slug)
    except Workflow.DoesNotExist:
        raise NotFound(f"No workflow with slug {slug!r}.") from None


def get_workflow_to_start(slug: str, cached: bool = False) -> Workflow:
    """`get_workflow` for a start: one prepared statement, the version's definition not read.

    With `cached`, perhaps no statement at all: see hotreads.find_workflow.
    """
    workflow = hotreads.find_workflow(slug, cached)
    if workflow is None:
        raise NotFound(f"No workflow with slug {slug!r}.")
    return workflow


def export_workflow(workflow: Workflow, version: WorkflowVersion | None = None) -> dict[str, Any]:
    """Return a workflow and one version's definition (the active one by default) as JSON."""
    version = version or workflow.active_version or workflow.versions.first()
    if version is None:
        raise NotFound(f"Workflow {workflow.slug!r} has no version to export.")
    return {
        "format": EXPORT_FORMAT,
        "slug": workflow.slug,
        "title": workflow.title,
        "description": workflow.description,
        "version": version.number,
        "checksum": version.checksum,
        "definition": version.definition,
    }


def import_workflow(data: Any, publish: bool = False, user: Any = None) -> WorkflowVersion:
    """Create (or add a version to) a workflow from an export; optionally publish it."""
    if not isinstance(data, dict) or data.get("format") != EXPORT_FORMAT:
        raise Invalid(f'Not a Switchyard workflow export: expected "format": "{EXPORT_FORMAT}".')
    for field in ("slug", "title", "definition"):
        if field not in data:
            raise Invalid(f"The export has no {field!r} field.")
    with transaction.atomic():
        workflow, _ = Workflow.objects.get_or_create(
            slug=data["slug"], defaults={"title": data["title"], "description": data.get("description", "")}
        )
        version = create_version(workflow, data["definition"], comment="imported", user=user)
        if publish:
            version = publish_version(version)
    return version
