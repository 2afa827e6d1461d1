"""Workflows made through the domain calls (never through the views under test), shared by
the editor's view tests, its browser tests and its benchmark."""

from __future__ import annotations

from typing import Any

from workflows.store.models import Workflow, WorkflowVersion
from workflows.versions import publish as versions

CHAIN: dict[str, Any] = {
    "nodes": [
        {"id": "a", "handler": "core.noop"},
        {"id": "b", "handler": "core.echo"},
        {"id": "c", "handler": "core.noop"},
    ],
    "edges": [{"source": "a", "target": "b"}, {"source": "b", "target": "c"}],
}


def make_workflow(slug: str, definition: dict[str, Any] | None = CHAIN, *, publish: bool = True) -> Workflow:
    """Create a workflow; with a definition, its v1 (published and active unless told not)."""
    workflow = versions.create_workflow(slug, slug.replace("-", " ").title())
    if definition is not None:
        version = versions.create_version(workflow, definition, comment="first")
        if publish:
            versions.publish_version(version)
    workflow.refresh_from_db()
    return workflow


def add_draft(workflow: Workflow, definition: dict[str, Any], comment: str = "draft") -> WorkflowVersion:
    return versions.create_version(workflow, definition, comment=comment)
