"""Workflows as the tools of an `llm.agent` node: what the model is offered, and a call's start.

An agent node lists published workflows in `workflow_tools` (slugs). Each is offered to the
model as a function `workflow__<slug>`, described by the workflow's title and description,
its arguments the input_schema of the workflow's active version (any object when it has
none). What is offered is read when an attempt (or its continuation) starts: a workflow
paused, deleted or left without an active version since the definition was published is not
offered, and calling it anyway is told to the model as an unknown tool.

A call is a child run of its own (the same ChildRun link as a `workflow.run` node's), made
durable without holding a worker while the child runs. In ONE transaction (`start_calls`):
the tool call's step is recorded `waiting` (only while the attempt is still the node's
running one: agents.record_step), the child run is created with the idempotency key
`parent:<run>:<node>:tool:<turn>.<index>` (one per tool call, the same in every attempt that
makes it) and linked to the step, and the node moves running -> waiting
(`transitions.park_agent`). The worker then lets the attempt go (runtime/kinds.Parked) and
takes other work. A kill -9 before the commit leaves no step, no child and the node running:
the reconciler fails the lost attempt, and its retry makes the same call again under the same
key, so there is one child, never two; after the commit, the node waits and nothing is lost.

The child's end comes back through childlinks.settle_parents, in the transaction that ends
the child: the step gets the child's output (ok) or its failure (error, bounded: the model is
told, as for a handler tool's HandlerError), and the same attempt is queued again with a new
job (`transitions.resume_agents`); the loop goes on from its recorded steps. A lost job is
the reconciler's (queued attempts whose job waits nowhere). A child that cannot start
(deleted or paused since, no active version, arguments off the version's input_schema, too
deep) is an error told to the model, and no child is made.

Workflow calls that follow one another in a turn start together, in that one transaction,
and the attempt is queued again once the last of their children has ended (settle_calls
locks the node's row, so two children ending at once cannot both think the other still
runs): three sub-workflows take as long as the slowest, not the sum. A handler tool's call
between them ends the batch (it runs in the worker, in order). Waiting does not count
toward the node's timeout, which bounds each stretch in a worker; a cancel of the parent
run cancels the child (runs.cancel_locked). A call starts the workflow's active version, as
a `workflow.run` node without `version` does: publishing a tool workflow changes what its
agents call from then on.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction

from workflows.agents import steps as agents
from workflows.children import start as children
from workflows.core import agent as core
from workflows.runs import actions as runs
from workflows.runtime import transitions
from workflows.store.errors import DomainError
from workflows.store.graphs import load_graph
from workflows.store.models import AgentStep, Run, Workflow


@dataclass(frozen=True)
class Offered:
    """A workflow offered as a tool: its function spec and the schema its arguments must match."""

    slug: str
    spec: dict[str, Any]
    schema: dict[str, Any]


def offer(slugs: list[str]) -> list[Offered]:
    """The workflows among `slugs` that can be called now, in the order given."""
    found = {
        w.slug: w for w in Workflow.objects.filter(slug__in=slugs, paused=False, active_version__isnull=False)
    }
    offered = []
    for slug in slugs:
        workflow = found.get(slug)
        if workflow is None or workflow.active_version_id is None:
            continue
        schema = load_graph(workflow.active_version_id).input_schema or {"type": "object"}
        spec = core.workflow_tool_spec(slug, workflow.title, workflow.description, schema)
        offered.append(Offered(slug, spec, schema))
    return offered


@dataclass(frozen=True)
class ToolCall:
    """One call of a workflow tool, as the agent loop records it."""

    seq: int
    key: str  # the tool call's idempotency key (core.CallTool.key)
    started: datetime
    fields: dict[str, Any]  # the step's turn_seq, call_id, tool and arguments
    slug: str
    arguments: dict[str, Any]


def target(call: ToolCall) -> tuple[Workflow, int]:
    """The workflow and version a call starts; raise children.CannotStart naming why not."""
    workflow, version_id = children.child_target({"workflow": call.slug})
    try:
        runs.check_input(call.arguments)
        runs.check_input_schema(version_id, call.arguments)
    except DomainError as exc:
        raise children.CannotStart(str(exc)) from None
    return workflow, version_id


def start_calls(at: agents.Attempt, calls: list[tuple[ToolCall, tuple[Workflow, int]]]) -> list[Run]:
    """Record the calls waiting, start their child runs and make the node wait, in one
    transaction (calls of one turn run side by side: the agent goes on when all have ended).

    Each call comes with its target (`target`); raise agents.Superseded (nothing written)
    when the attempt no longer runs.
    """
    started = []
    with transaction.atomic():
        for call, (workflow, version_id) in calls:
            agents.record_step(
                at, call.seq, core.TOOL, core.WAITING, call.key, call.started, call.started, **call.fields
            )
            step_id = AgentStep.objects.values_list("pk", flat=True).get(
                node_run_id=at.noderun_id, seq=call.seq
            )
            parent = children.Parent(at.run_id, at.node_id, at.noderun_id, at.attempt, step_id)
            started.append(
                children.open_child(parent, workflow, version_id, call.arguments, f"parent:{call.key}")
            )
        if not transitions.park_agent(at.noderun_id, at.attempt):
            raise agents.Superseded(
                f"Node {at.node_id!r} of run {at.run_id} no longer runs attempt {at.attempt}."
            )
    return started
