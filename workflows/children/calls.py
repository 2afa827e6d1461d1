"""Workflows calling workflows (`workflow.run` nodes): what a save, a publish or an activation
of a definition is refused for, each issue naming the node and its field.

- the child workflow does not exist (or was deleted), is paused, or has no such published
  version (a named `version`); a workflow an `llm.agent` offers as a tool
  (`workflow_tools[j]`) likewise, and it must have an active version (its input_schema is
  the tool's arguments);
- the definition would make workflows call each other in a cycle, counted over the active
  versions of every other workflow with this definition in place of its workflow's
  (a -> b -> a: a run would start runs of itself forever). A workflow calling itself is
  such a cycle.

What can change after publishing (a child paused or deleted later) is the node's error at
run time (workflows/children/start.py; for an agent's tool, an error told to the model,
workflows/agents/tools.py); nesting depth is bounded there too (CHILD_DEPTH_LIMIT).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db.models import Q

from workflows.core.children import Call, calls_of, find_call_cycle
from workflows.core.definition import Issue
from workflows.core.graph import AGENT, CHILD
from workflows.store.models import Workflow, WorkflowVersion


def call_issues(definition: Any, workflow: Workflow | None) -> list[Issue]:
    """Return the issues of a definition's calls to other workflows (none: fine)."""
    if not isinstance(definition, Mapping):
        return []
    calls = calls_of(definition)
    if not calls:
        return []
    found = {w.slug: w for w in Workflow.objects.filter(slug__in={call.slug for call in calls})}
    issues = [issue for call in calls for issue in target_issues(call, definition, found)]
    if workflow is not None:
        issues += cycle_issues(calls, workflow)
    return issues


def target_issues(call: Call, definition: Mapping[str, Any], found: dict[str, Workflow]) -> list[Issue]:
    path, node_id, slug = f"nodes[{call.index}].config.{call.field}", call.node_id, call.slug
    workflow = found.get(slug)
    if workflow is None:
        return [Issue(path, f"there is no workflow {slug!r} (node '{node_id}')", "unknown_workflow", node_id)]
    if workflow.paused:
        message = f"workflow {slug!r} is paused; resume it before calling it (node '{node_id}')"
        return [Issue(path, message, "paused_workflow", node_id)]
    if call.is_tool:  # its tool's arguments are its active version's input_schema
        if workflow.active_version_id is not None:
            return []
        message = (
            f"workflow {slug!r} has no published version to call as a tool; publish one (node '{node_id}')"
        )
        return [Issue(path, message, "unknown_version", node_id)]
    number = (definition["nodes"][call.index].get("config") or {}).get("version")
    if number is None:
        return []
    published = WorkflowVersion.objects.filter(
        workflow=workflow, number=number, status=WorkflowVersion.PUBLISHED
    ).exists()
    if published:
        return []
    message = f"workflow {slug!r} has no published version {number} (node '{node_id}')"
    return [Issue(f"nodes[{call.index}].config.version", message, "unknown_version", node_id)]


def cycle_issues(calls: list[Call], workflow: Workflow) -> list[Issue]:
    graph = call_graph()
    graph[workflow.slug] = {call.slug for call in calls}
    cycle = find_call_cycle(graph, workflow.slug)
    if cycle is None:
        return []
    call = next(call for call in calls if call.slug == cycle[1])
    message = (
        "workflows would call each other in a cycle: "
        + " -> ".join(cycle)
        + f" (node '{call.node_id}'); a run would start itself without end"
    )
    path = f"nodes[{call.index}].config.{call.field}"
    return [Issue(path, message, "call_cycle", call.node_id, cycle=tuple(cycle))]


def call_graph() -> dict[str, set[str]]:
    """Slug -> the slugs the active version of each workflow calls (only those that call any)."""
    callers = Q(definition__contains={"nodes": [{"handler": CHILD}]}) | Q(
        definition__contains={"nodes": [{"handler": AGENT}]}
    )
    rows = WorkflowVersion.objects.filter(
        callers, pk__in=Workflow.objects.filter(active_version__isnull=False).values("active_version_id")
    ).values_list("workflow__slug", "definition")
    graph = {slug: {call.slug for call in calls_of(definition)} for slug, definition in rows}
    return {slug: callees for slug, callees in graph.items() if callees}
