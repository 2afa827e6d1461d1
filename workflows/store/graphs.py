"""Published graphs as the runtime reads them: parsed once per version and kept (they never change)."""

from __future__ import annotations

from functools import lru_cache

from django.conf import settings

from workflows.core.definition import Limits, parse_definition
from workflows.core.graph import Graph
from workflows.store.models import Workflow, WorkflowVersion


@lru_cache(maxsize=1024)
def load_graph(version_id: int) -> Graph:
    """Return the parsed graph of a version (cached: published versions never change)."""
    definition = WorkflowVersion.objects.values_list("definition", flat=True).get(pk=version_id)
    return parse_definition(definition, None, Limits(max_nodes=settings.SWITCHYARD["MAX_NODES"]))


@lru_cache(maxsize=1024)
def workflow_of(version_id: int) -> int:
    """Return the workflow a version belongs to (cached: a version never moves)."""
    return int(WorkflowVersion.objects.values_list("workflow_id", flat=True).get(pk=version_id))


def active_versions() -> dict[int, int]:
    """Return workflow id -> active version id for every workflow that has one."""
    return dict(Workflow.objects.filter(active_version__isnull=False).values_list("id", "active_version_id"))
