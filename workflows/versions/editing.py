"""What the browser editor needs from the domain beyond versions, drafts and runs.

The editor creates, saves, publishes and activates through the API (``catalog``: the change
and its audit entry in one transaction); this module adds the few things those do not offer:
which version to open, the history page's rows, the palette, and a test run pinned to the
version being edited (the API's ``start_test_run``).

Test runs of a draft. A run is pinned to a version, and every process caches a version's
parsed graph by id forever (``store.graphs.load_graph``) because published versions never
change. A draft does change, so a run pinned to it would let schedulers work from a graph
that is no longer the stored one. A test run of a draft therefore freezes the draft first:
the draft's current definition becomes a published but *not active* version (its comment
says which draft and revision it snapshots), and the run is pinned to that. Live traffic
keeps using the active version; the snapshot is immutable, shows in the history like any
version, and is reused while the draft stays unchanged (matched by checksum).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from workflows import handlers
from workflows.core.definition import LLM_HANDLER_PREFIX
from workflows.core.graph import AGENT, CHILD, TASK, WAIT_KINDS
from workflows.llm import providers
from workflows.runs import actions as runs
from workflows.store import audit
from workflows.store.errors import Invalid, NotFound
from workflows.store.models import TEST_VERSION_PREFIX, Run, Workflow, WorkflowVersion
from workflows.versions import catalog

SNAPSHOT_PREFIX = TEST_VERSION_PREFIX


# --------------------------------------------------------------------------- reading


def palette() -> list[dict[str, Any]]:
    """Return every registered handler: name, docstring summary, docstring, config schema."""
    return [
        {
            "name": h.name,
            "summary": h.summary(),
            "doc": h.doc,
            "config_schema": offered_schema(h),
            "kind": kind_of_handler(h.name),
        }
        for h in handlers.registered().values()
    ]


def offered_schema(handler: handlers.Handler) -> dict[str, Any] | None:
    """The config schema the editor shows: an LLM node's lists the providers and models that exist."""
    schema = handler.config_schema
    if schema is None or not handler.name.startswith(LLM_HANDLER_PREFIX):
        return schema
    return providers.with_provider_choices(schema)


def kind_of_handler(name: str) -> str:
    """The node kind a handler makes ("task" for handlers that run in a worker)."""
    return name if name in (*WAIT_KINDS, AGENT, CHILD) else TASK


def child_choices(workflow: Workflow) -> list[dict[str, Any]]:
    """The workflows a workflow.run node of `workflow` may call (all but itself), for the
    editor's picker: slug, title, paused, and the published version numbers."""
    published = WorkflowVersion.objects.filter(status=WorkflowVersion.PUBLISHED)
    numbers: dict[int, list[int]] = {}
    for workflow_id, number in published.order_by("-number").values_list("workflow_id", "number"):
        numbers.setdefault(workflow_id, []).append(number)
    return [
        {"slug": w.slug, "title": w.title, "paused": w.paused, "versions": numbers.get(w.pk, [])}
        for w in Workflow.objects.exclude(pk=workflow.pk).order_by("slug")
    ]


def is_snapshot(version: WorkflowVersion) -> bool:
    """Return whether a version is the frozen copy of a draft made for a test run."""
    return version.is_test_version


def get_version(workflow: Workflow, number: int) -> WorkflowVersion:
    try:
        return workflow.versions.select_related("created_by").get(number=number)
    except WorkflowVersion.DoesNotExist:
        raise NotFound(f"Workflow {workflow.slug!r} has no version {number}.") from None


def version_to_open(workflow: Workflow) -> WorkflowVersion | None:
    """Return the version an author most likely wants: the newest draft newer than the
    active version, else the active version, else the newest version (None if none)."""
    newest = workflow.versions.select_related("created_by").order_by("-number").first()
    active = workflow.active_version
    if active is None or newest is None:
        return newest
    newest_draft = workflow.versions.filter(status=WorkflowVersion.DRAFT, number__gt=active.number)
    return newest_draft.order_by("-number").first() or active


def version_summary(version: WorkflowVersion, active_id: int | None) -> dict[str, Any]:
    """Describe a version for the history: who, when, comment, status."""
    return {
        "number": version.number,
        "status": version.status,
        "is_active": version.pk == active_id,
        "is_snapshot": is_snapshot(version),
        "revision": version.revision,
        "comment": version.comment,
        "created_by": version.created_by.get_username() if version.created_by else "",
        "created_at": version.created_at.isoformat(),
        "published_at": version.published_at.isoformat() if version.published_at else None,
        "checksum": version.checksum,
        "nodes": len(version.definition.get("nodes", [])),
    }


# --------------------------------------------------------------------------- changing


def start_test_run(version: WorkflowVersion, run_input: Any, user: Any = None) -> Run:
    """Start a run pinned to ``version``, or to an immutable snapshot of it if it is a draft."""
    if not isinstance(run_input, dict):
        raise Invalid('input must be a JSON object, such as {} or {"user_id": "u-7"}.')
    with transaction.atomic():
        pinned = version if version.is_published else freeze_draft(version, user)
        run, _ = runs.start_run(pinned.workflow, run_input, version=pinned)
        Run.objects.filter(pk=run.pk).update(is_test=True)
        run.is_test = True
        audit.record(user, "run.test_start", run, version=pinned.number, edited_version=version.number)
    return run


def freeze_draft(draft: WorkflowVersion, user: Any = None) -> WorkflowVersion:
    """Return a published, inactive version with the draft's definition (reused if one exists)."""
    same = draft.workflow.versions.filter(status=WorkflowVersion.PUBLISHED, checksum=draft.checksum)
    existing = same.order_by("-number").first()
    if existing is not None:
        return existing
    comment = f"{SNAPSHOT_PREFIX} v{draft.number} (revision {draft.revision})"
    snapshot = catalog.create_draft(draft.workflow, draft.definition, comment, actor=user)
    return catalog.publish(snapshot, activate=False, actor=user)
