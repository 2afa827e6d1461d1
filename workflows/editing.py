"""What the browser editor needs from the domain beyond versions, drafts and runs.

The editor creates, saves, publishes and activates through the same calls as the API
(``catalog``: the change and its audit entry in one transaction); this module adds the few things those do not offer:
which version to open, the history as JSON, the palette, a test run pinned to the version
being edited, and a run's per-node state for the canvas.

Test runs of a draft. A run is pinned to a version, and every process caches a version's
parsed graph by id forever (``versions.load_graph``) because published versions never
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

from workflows import audit, catalog, handlers, runs
from workflows.core import engine
from workflows.core.definition import canonical_json
from workflows.core.diff import diff_definitions
from workflows.errors import Invalid, NotFound
from workflows.models import NodeRun, Run, Workflow, WorkflowVersion

SNAPSHOT_PREFIX = "test-run snapshot of draft"
RUN_FINISHED = frozenset({engine.RUN_SUCCEEDED, engine.RUN_FAILED, engine.RUN_CANCELLED})
NODE_ERROR_CHARS = 500
NODE_OUTPUT_PREVIEW_BYTES = 2000


# --------------------------------------------------------------------------- reading


def palette() -> list[dict[str, Any]]:
    """Return every registered handler: name, docstring summary, docstring, config schema."""
    return [
        {"name": h.name, "summary": h.summary(), "doc": h.doc, "config_schema": h.config_schema}
        for h in handlers.registered().values()
    ]


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
        "is_snapshot": version.comment.startswith(SNAPSHOT_PREFIX),
        "revision": version.revision,
        "comment": version.comment,
        "created_by": version.created_by.get_username() if version.created_by else "",
        "created_at": version.created_at.isoformat(),
        "published_at": version.published_at.isoformat() if version.published_at else None,
        "checksum": version.checksum,
        "nodes": len(version.definition.get("nodes", [])),
    }


def version_history(workflow: Workflow) -> list[dict[str, Any]]:
    """Return every version of a workflow, newest first."""
    rows = workflow.versions.select_related("created_by").order_by("-number")
    return [version_summary(v, workflow.active_version_id) for v in rows]


def version_detail(version: WorkflowVersion, active_id: int | None) -> dict[str, Any]:
    """Return a version with its definition and the revision a save must be based on."""
    return {**version_summary(version, active_id), "definition": version.definition}


def diff_versions(workflow: Workflow, old_number: int, new_number: int) -> dict[str, Any]:
    """Return both definitions and the structural diff from ``old_number`` to ``new_number``."""
    old, new = get_version(workflow, old_number), get_version(workflow, new_number)
    return {
        "old": version_detail(old, workflow.active_version_id),
        "new": version_detail(new, workflow.active_version_id),
        "diff": diff_definitions(old.definition, new.definition).as_dict(),
    }


# --------------------------------------------------------------------------- changing


def save_definition(
    workflow: Workflow,
    base_number: int | None,
    revision: int | None,
    definition: Any,
    comment: str = "",
    user: Any = None,
) -> tuple[WorkflowVersion, bool]:
    """Save the editor's definition; return (version, created).

    Based on a draft, the draft changes in place if nobody saved it since ``revision``
    (``drafts.StaleRevision`` otherwise). Based on a published version, or on nothing
    (a new workflow), the definition becomes the workflow's next draft.
    """
    base = get_version(workflow, base_number) if base_number is not None else None
    if base is None or base.is_published:
        return catalog.create_draft(workflow, definition, comment, actor=user), True
    if revision is None:
        raise Invalid("revision: say which revision of the draft your change is based on.")
    return catalog.update_draft(base, definition, revision, comment or None, actor=user), False


def start_test_run(version: WorkflowVersion, run_input: Any, user: Any = None) -> Run:
    """Start a run pinned to ``version``, or to an immutable snapshot of it if it is a draft."""
    if not isinstance(run_input, dict):
        raise Invalid('input must be a JSON object, such as {} or {"user_id": "u-7"}.')
    with transaction.atomic():
        pinned = version if version.is_published else freeze_draft(version, user)
        run, _ = runs.start_run(pinned.workflow, run_input, version=pinned)
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


# --------------------------------------------------------------------------- watching


def get_workflow_run(workflow: Workflow, run_id: int) -> Run:
    try:
        return Run.objects.select_related("version").get(pk=run_id, workflow=workflow)
    except Run.DoesNotExist:
        raise NotFound(f"Workflow {workflow.slug!r} has no run {run_id}.") from None


def run_state(run: Run) -> dict[str, Any]:
    """Return a run's status and each node's status, attempt, error and a small output preview."""
    rows = NodeRun.objects.filter(run=run).values_list("node_id", "status", "attempt", "error", "output")
    nodes = {
        node_id: {
            "status": status,
            "attempt": attempt,
            "error": error[:NODE_ERROR_CHARS],
            "output": output_preview(output),
        }
        for node_id, status, attempt, error, output in rows
    }
    return {
        "id": run.pk,
        "status": run.status,
        "version": run.version.number,
        "finished": run.status in RUN_FINISHED,
        "nodes": nodes,
    }


def output_preview(output: Any) -> str | None:
    """Return a node's output as JSON text, cut to a preview size; None if there is none."""
    if output is None:
        return None
    text = canonical_json(output)
    if len(text) <= NODE_OUTPUT_PREVIEW_BYTES:
        return text
    return text[:NODE_OUTPUT_PREVIEW_BYTES] + f"... ({len(text)} characters)"
