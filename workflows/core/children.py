"""Child runs (`workflow.run`): the node's config, a run's output, and calls between workflows.

Pure: standard library only. A `workflow.run` node starts another workflow as a run of its
own (workflows/children/start.py) and waits, holding no worker, until that child run ends: the
child's output becomes the node's output, its failure the node's failure.

Config: `workflow` (the child's slug), optionally `version` (a published version number;
else the child workflow's active version when the node starts) and `input` (the child's run
input: a JSON object whose strings may hold `{input.key}` and `{upstream.node.key}`
placeholders, filled as http.request fills them; a string that is only a placeholder keeps
the value's type). Without `input`, the child gets the parent's run input.

A run's output is what its sinks (nodes with no successors) produced: the one sink's output,
or an object of the succeeded sinks' outputs by node id.

Workflows call each other through these nodes, and through the workflows an `llm.agent`
offers as tools (`workflow_tools`, workflows/agents/tools.py): both are calls (`calls_of`), and
`find_call_cycle` refuses a publish that would make them call each other in a cycle (a run
would start itself forever).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workflows.core.graph import AGENT, CHILD, Graph

SLUG_PATTERN = r"^[-a-zA-Z0-9_]+$"

CHILD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["workflow"],
    "properties": {
        "workflow": {
            "type": "string",
            "minLength": 1,
            "maxLength": 100,
            "pattern": SLUG_PATTERN,
            "description": "The child workflow's slug.",
            "x-picker": "workflow",
        },
        "version": {
            "type": "integer",
            "minimum": 1,
            "description": "A published version number; empty: the child's active version when the node starts.",
        },
        "input": {
            "type": "object",
            "description": "The child run's input; strings may hold {input.key} and {upstream.node.key}. "
            "Empty: the parent's run input.",
        },
    },
}


@dataclass(frozen=True)
class Call:
    """A definition's call of another workflow: which node, the slug, and the config field
    that names it (`workflow` of a workflow.run node, `workflow_tools[j]` of an llm.agent)."""

    index: int
    node_id: str
    slug: str
    field: str

    @property
    def is_tool(self) -> bool:
        return self.field != "workflow"


def calls_of(definition: Mapping[str, Any]) -> list[Call]:
    """Return the calls of other workflows a definition makes: its workflow.run nodes and
    the workflows its llm.agent nodes may call as tools."""
    found = []
    for index, node in enumerate(definition.get("nodes") or []):
        if not isinstance(node, dict) or node.get("handler") not in (CHILD, AGENT):
            continue
        config = node.get("config") or {}
        config = config if isinstance(config, dict) else {}
        node_id = str(node.get("id", ""))
        if node.get("handler") == CHILD:
            slugs = [("workflow", config.get("workflow"))]
        else:
            tools = config.get("workflow_tools")
            slugs = [
                (f"workflow_tools[{j}]", s) for j, s in enumerate(tools if isinstance(tools, list) else [])
            ]
        found += [
            Call(index, node_id, slug, field) for field, slug in slugs if isinstance(slug, str) and slug
        ]
    return found


def find_call_cycle(calls: Mapping[str, set[str]], start: str) -> list[str] | None:
    """Return a cycle of calls through `start` as [start, ..., start], or None.

    `calls` maps a workflow slug to the slugs its nodes call.
    """
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen: set[str] = set()
    while stack:
        slug, path = stack.pop()
        for callee in sorted(calls.get(slug, ())):
            if callee == start:
                return [*path, start]
            if callee not in seen:
                seen.add(callee)
                stack.append((callee, [*path, callee]))
    return None


def sinks(graph: Graph) -> tuple[str, ...]:
    """The nodes with no successors, in definition order."""
    return tuple(node_id for node_id in graph.nodes if not graph.successors(node_id))


def run_output(graph: Graph, outputs: Mapping[str, Any]) -> Any:
    """A finished run's output from its succeeded nodes' outputs (see the module's docstring)."""
    ends = sinks(graph)
    if len(ends) == 1:
        return outputs.get(ends[0])
    return {node_id: outputs[node_id] for node_id in ends if node_id in outputs}
