"""The tools an MCP client sees: one per published workflow, and the fixed tools.

A workflow's tool is named from its slug, kept to what every client accepts (MCP allows
`[A-Za-z0-9_.-]`, 1 to 128 characters; Claude's and OpenAI's tool APIs take only
`[A-Za-z0-9_-]`, at most 64): other characters become `_`, and a longer slug keeps its first
55 characters and an 8-character hash of the whole (two long slugs never share a name).
The fixed tools start with `switchyard_`; a workflow whose name would be one of them is not
offered as a tool (its runs start over the REST API).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from workflows.core.states import RunStatus
from workflows.store.graphs import load_graph
from workflows.store.models import Workflow

MAX_NAME = 64
NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_-]")
OPEN_OBJECT: dict[str, Any] = {"type": "object", "additionalProperties": True}

LIST_RUNS, READ_RUN, DECIDE_APPROVAL = (
    "switchyard_list_runs",
    "switchyard_read_run",
    "switchyard_decide_approval",
)
RUN_ID = {"type": "integer", "minimum": 1, "description": "The run's id."}


@dataclass(frozen=True)
class Tool:
    """A tool as offered (its description: the definition's, else the workflow's, else its
    title): `slug` names the workflow it starts (None: a fixed tool), `action`
    the controlplane.access action a caller needs to call it; `read_only` is the hint clients
    use to call without asking (listing and reading runs change nothing)."""

    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    action: str
    slug: str | None = None
    read_only: bool = False


FIXED_TOOLS = (
    Tool(
        LIST_RUNS,
        "List runs",
        "List Switchyard runs, newest first, optionally of one workflow and in one status.",
        {
            "type": "object",
            "properties": {
                "workflow": {"type": "string", "description": "A workflow's slug."},
                "status": {"type": "string", "enum": [str(s) for s in RunStatus]},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
            },
            "additionalProperties": False,
        },
        "view",
        read_only=True,
    ),
    Tool(
        READ_RUN,
        "Read a run",
        "Read a run: its status, each node's status and error, its output, the approvals it "
        "waits on and a link to its page.",
        {
            "type": "object",
            "properties": {"run_id": RUN_ID},
            "required": ["run_id"],
            "additionalProperties": False,
        },
        "view",
        read_only=True,
    ),
    Tool(
        DECIDE_APPROVAL,
        "Decide an approval",
        "Approve or reject a human.approval node that waits, with a comment. Name the approval "
        "by approval_id, or by run_id (and node_id when the run waits on more than one).",
        {
            "type": "object",
            "properties": {
                "approval_id": {"type": "integer", "minimum": 1},
                "run_id": RUN_ID,
                "node_id": {"type": "string"},
                "decision": {"type": "string", "enum": ["approve", "reject"]},
                "comment": {"type": "string", "maxLength": 2000},
            },
            "required": ["decision"],
            "additionalProperties": False,
        },
        "decide_approval",
    ),
)
FIXED = {tool.name: tool for tool in FIXED_TOOLS}


def tool_name(slug: str) -> str:
    """Return the tool name of the workflow `slug` (see the module docstring)."""
    name = NOT_ALLOWED.sub("_", slug)
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(slug.encode()).hexdigest()[:8]
    return f"{name[: MAX_NAME - 9]}_{digest}"


def input_schema(schema: dict[str, Any] | None) -> dict[str, Any]:
    """Return a workflow's input schema as a tool's: an object schema (open when it has none)."""
    if not schema:
        return dict(OPEN_OBJECT)
    return {"type": "object", **schema}


def workflow_tool(workflow: Workflow) -> Tool:
    assert workflow.active_version_id is not None  # only published workflows are read
    graph = load_graph(workflow.active_version_id)
    version = workflow.active_version
    said = (
        version.definition.get("description", "") if version and isinstance(version.definition, dict) else ""
    )
    description = str(said).strip() or workflow.description.strip() or workflow.title
    return Tool(
        tool_name(workflow.slug),
        workflow.title,
        f"Start a run of the Switchyard workflow {workflow.slug!r}: {description}",
        input_schema(graph.input_schema),
        "start_run",
        workflow.slug,
    )


def workflow_tools() -> list[Tool]:
    """Return one tool per workflow with an active (published) version, by slug."""
    published = Workflow.objects.filter(active_version__isnull=False).select_related("active_version")
    tools = [workflow_tool(w) for w in published.order_by("slug")]
    return [tool for tool in tools if tool.name not in FIXED]


def all_tools() -> list[Tool]:
    return [*workflow_tools(), *FIXED_TOOLS]


def find_tool(name: str) -> Tool | None:
    """Return the tool called `name`, or None when there is none (or it is no longer published)."""
    if name in FIXED:
        return FIXED[name]
    published = Workflow.objects.filter(active_version__isnull=False).select_related("active_version")
    # Slugs are [-A-Za-z0-9_] (SlugField): a name is its slug, or a long slug's prefix and hash.
    exact = len(name) < MAX_NAME or name[-9] != "_"
    candidates = published.filter(slug=name) if exact else published.filter(slug__startswith=name[:-9])
    for workflow in candidates.order_by("slug"):
        if tool_name(workflow.slug) == name:
            return workflow_tool(workflow)
    return None
