"""The workflow catalog as people change it, each change with its audit entry.

Thin wrappers over `versions` and `drafts` for the surfaces (API, pages): one transaction
holds the change and the audit record, so neither exists without the other. `actor` is a
user, an API key (acting for its owner) or None (the system).
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.db.models.deletion import ProtectedError

from workflows.core.states import RunStatus
from workflows.store import audit
from workflows.store.errors import Conflict
from workflows.store.models import Run, Workflow, WorkflowVersion
from workflows.versions import drafts, publish as versions

IN_FLIGHT = (RunStatus.RUNNING, RunStatus.WAITING, RunStatus.COMPENSATING)


def person_of(actor: Any) -> Any:
    """Return the user behind an actor: the user itself, a key's owner, or None."""
    return actor if getattr(actor, "is_authenticated", False) else getattr(actor, "owner", None)


def create_workflow(slug: str, title: str, description: str = "", actor: Any = None) -> Workflow:
    try:
        with transaction.atomic():
            workflow = versions.create_workflow(slug, title, description)
            audit.record(actor, "workflow.create", workflow, slug=slug)
    except IntegrityError:  # two requests for one slug at the same moment
        raise Conflict(f"A workflow with slug {slug!r} already exists.") from None
    return workflow


def update_workflow(workflow: Workflow, changes: dict[str, Any], actor: Any = None) -> Workflow:
    """Change a workflow's title, description or default priority."""
    with transaction.atomic():
        for field, value in changes.items():
            setattr(workflow, field, value)
        workflow.save(update_fields=[*changes, "updated_at"])
        audit.record(actor, "workflow.update", workflow, **changes)
    return workflow


def delete_workflow(workflow: Workflow, actor: Any = None) -> None:
    """Delete a workflow with its versions and finished runs; refused while runs are in flight."""
    with transaction.atomic():
        locked = Workflow.objects.select_for_update().get(pk=workflow.pk)
        in_flight = Run.objects.filter(workflow=locked, status__in=IN_FLIGHT).count()
        if in_flight:
            raise Conflict(
                f"Workflow {locked.slug!r} has {in_flight} run(s) in flight; cancel them or wait "
                "for them to finish, then delete it."
            )
        audit.record(actor, "workflow.delete", locked, slug=locked.slug)
        Workflow.objects.filter(pk=locked.pk).update(active_version=None)
        Run.objects.filter(workflow=locked).delete()
        try:
            Workflow.objects.filter(pk=locked.pk).delete()
        except ProtectedError:  # a run started between the count and here (it waited on the lock)
            raise Conflict(f"Workflow {locked.slug!r} just got a new run; try again.") from None


def create_draft(
    workflow: Workflow, definition: Any, comment: str = "", actor: Any = None
) -> WorkflowVersion:
    with transaction.atomic():
        version = versions.create_version(workflow, definition, comment, user=person_of(actor))
        audit.record(actor, "version.create", version, workflow=workflow.slug, number=version.number)
    return version


def update_draft(
    version: WorkflowVersion, definition: Any, based_on_revision: int, comment: str | None, actor: Any = None
) -> WorkflowVersion:
    """Replace a draft's definition unless someone saved it since `based_on_revision` (412)."""
    with transaction.atomic():
        updated = drafts.update_draft(version.pk, definition, based_on_revision, comment)
        audit.record(actor, "version.update", updated, number=updated.number, revision=updated.revision)
    return updated


def publish(version: WorkflowVersion, activate: bool = True, actor: Any = None) -> WorkflowVersion:
    with transaction.atomic():
        published = versions.publish_version(version, activate)
        audit.record(actor, "version.publish", published, number=published.number, activate=activate)
    return published


def activate(version: WorkflowVersion, actor: Any = None) -> WorkflowVersion:
    with transaction.atomic():
        versions.activate_version(version)
        audit.record(actor, "version.activate", version, number=version.number)
    return version


def import_workflow(data: Any, publish: bool = False, actor: Any = None) -> WorkflowVersion:
    with transaction.atomic():
        version = versions.import_workflow(data, publish, user=person_of(actor))
        audit.record(actor, "workflow.import", version, slug=version.workflow.slug, publish=publish)
    return version


def matching_workflows(text: str) -> QuerySet[Workflow]:
    """The workflows whose slug, title or description holds `text` (any case); all when it is blank."""
    text = text.strip()
    if not text:
        return Workflow.objects.all()
    return Workflow.objects.filter(
        Q(slug__icontains=text) | Q(title__icontains=text) | Q(description__icontains=text)
    )
