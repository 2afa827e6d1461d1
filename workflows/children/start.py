"""Starting child runs: a ready `workflow.run` node waits and its child run starts, at once.

Called by the child kind's claim (runtime/kinds.py) in the scheduler. For each node, one
transaction moves it to `waiting` as a new attempt (`transitions.enter_waits`, conditional
on its status), creates the child run with the idempotency key
`parent:<run>:<node>:<attempt>` and writes the ChildRun link: after kill -9 at any point
either all of it happened or none, and a scheduler claiming the same node again changes
nothing (the move finds it waiting). The child's roots are enqueued, or its schedulers
told, after the commit (runs.create_run), as for any start; a lost job or notice is the
reconciler's, as for any run.

What cannot start (no such workflow, paused, no active or no such version, a placeholder
with no value, input not an object, nesting deeper than `CHILD_DEPTH_LIMIT`) fails the node
at once with a message naming it; the node's retry policy then applies as for a task.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from workflows.core.definition import canonical_json
from workflows.core.graph import Graph
from workflows.core.states import NodeStatus as N
from workflows.handlers import HandlerError
from workflows.handlers.builtin import render_value
from workflows.runs.actions import check_input, create_run
from workflows.runtime import bus, transitions
from workflows.runtime.transitions import Awake
from workflows.store.errors import DomainError
from workflows.store.graphs import load_graph
from workflows.store.models import ChildRun, Run, RunEvent, Workflow, WorkflowVersion


class CannotStart(Exception):
    """The child run cannot start; the message says why, for the node's error.

    `retryable=False` when starting again cannot help (the child's input cannot be made from
    what the node is given, or is not an object): the node is dead without a retry.
    """

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


@dataclass(frozen=True)
class Given:
    """What a workflow.run node is given: its graph, run, run input and predecessors' outputs."""

    graph: Graph
    run_id: int
    node_id: str
    input: Any
    upstream: dict[str, Any]


def start_children(rows: list[Any], status: N) -> int:
    """Make ready workflow.run nodes (jobs.Ready rows, still in `status`) wait, each with its
    child run started; return how many moved."""
    if not rows:
        return 0
    given = read_given([row.noderun_id for row in rows])
    moved, failed = 0, []
    for noderun_id, data in given.items():
        with transaction.atomic():
            entered = transitions.enter_waits(status, [noderun_id], [None])
            if not entered:
                continue
            moved += 1
            _, run_id, node_id, attempt, since = entered[0]
            try:
                start_child(noderun_id, attempt, data)
            except CannotStart as exc:
                error = f"workflow.run {node_id!r}: {exc}"
                awake = Awake(noderun_id, attempt, N.FAILED, None, error, exc.retryable)
                transitions.settle_children([awake])
                RunEvent.objects.create(
                    run_id=run_id,
                    kind="node.child_refused",
                    node_id=node_id,
                    attempt=attempt,
                    at=since,
                    data={"error": error[:500]},
                )
                failed.append(run_id)
    if failed:
        transaction.on_commit(lambda: bus.notify(failed))
    return moved


def start_child(noderun_id: int, attempt: int, data: Given) -> Run:
    """Create the child run and its link; raise CannotStart naming what is wrong."""
    config = data.graph.nodes[data.node_id].config
    workflow, version_id = child_target(config)
    child_input = input_of(config, data)
    parent = Parent(data.run_id, data.node_id, noderun_id, attempt)
    return open_child(
        parent, workflow, version_id, child_input, f"parent:{data.run_id}:{data.node_id}:{attempt}"
    )


@dataclass(frozen=True)
class Parent:
    """Who starts a child run: a workflow.run node's attempt, or an agent's tool call (its step)."""

    run_id: int
    node_id: str
    noderun_id: int
    attempt: int
    agent_step_id: int | None = None


def open_child(parent: Parent, workflow: Workflow, version_id: int, child_input: Any, key: str) -> Run:
    """Create a child run under the idempotency key `key`, its link and their history, inside
    the caller's transaction; raise CannotStart when it would nest too deep."""
    depth = depth_of(parent.run_id) + 1
    limit = settings.SWITCHYARD["CHILD_DEPTH_LIMIT"]
    if depth > limit:
        raise CannotStart(
            f"child runs would nest {depth} deep; the limit is {limit} (SWITCHYARD_CHILD_DEPTH_LIMIT)."
        )
    request_hash = hashlib.sha256(canonical_json(child_input).encode()).hexdigest()
    child = create_run(workflow, version_id, child_input, key, request_hash)
    if child is None:  # the key is taken: this attempt's child exists (cannot happen twice in one move)
        child = Run.objects.get(workflow=workflow, idempotency_key=key)
    # No link can exist yet: this transaction just moved the node into this attempt (or
    # recorded this tool call).
    ChildRun.objects.create(
        node_run_id=parent.noderun_id,
        attempt=parent.attempt,
        parent_run_id=parent.run_id,
        node_id=parent.node_id,
        child=child,
        depth=depth,
        agent_step_id=parent.agent_step_id,
    )
    RunEvent.objects.bulk_create(
        [
            RunEvent(
                run_id=parent.run_id,
                kind="node.child_started",
                node_id=parent.node_id,
                attempt=parent.attempt,
                at=timezone.now(),
                data={"child_run": child.pk, "workflow": workflow.slug},
            ),
            RunEvent(
                run_id=child.pk,
                kind="run.parent",
                node_id="",
                attempt=0,
                at=timezone.now(),
                data={"parent_run": parent.run_id, "node": parent.node_id, "attempt": parent.attempt},
            ),
        ]
    )
    return child


def child_target(config: Mapping[str, Any]) -> tuple[Workflow, int]:
    """The child workflow and the version to run, as they are now."""
    slug = config["workflow"]
    workflow = Workflow.objects.filter(slug=slug).first()
    if workflow is None:
        raise CannotStart(f"there is no workflow {slug!r} (was it deleted?).")
    if workflow.paused:
        raise CannotStart(f"workflow {slug!r} is paused; resume it, then replay or retry this node.")
    number = config.get("version")
    if number is None:
        if workflow.active_version_id is None:
            raise CannotStart(f"workflow {slug!r} has no active version; publish one.")
        return workflow, workflow.active_version_id
    version = WorkflowVersion.objects.filter(workflow=workflow, number=number).first()
    if version is None or not version.is_published:
        raise CannotStart(f"workflow {slug!r} has no published version {number}.")
    return workflow, version.pk


def input_of(config: Mapping[str, Any], data: Given) -> Any:
    """The child's run input: `input` with its placeholders filled, else the parent's input."""
    if "input" not in config:
        value = data.input
    else:
        sources = {"input": data.input, "upstream": data.upstream}
        try:
            value = render_value(config["input"], sources, "config.input")
        except HandlerError as exc:
            raise CannotStart(str(exc), retryable=exc.retryable) from None
    try:
        check_input(value)
    except DomainError as exc:
        raise CannotStart(f"the child's {exc.message}", retryable=False) from None
    return value


def depth_of(run_id: int) -> int:
    """How deep a run is: 0 for a run nobody started, else its link's depth."""
    depth = ChildRun.objects.filter(child_id=run_id).values_list("depth", flat=True).first()
    return depth or 0


def read_given(ids: list[int]) -> dict[int, Given]:
    """Read what each node is given: its run input and its predecessors' outputs."""
    claims = [row for row in transitions.read_inputs(ids, []) if row.kind == "claim"]
    graphs = {row.noderun_id: load_graph(row.version_id) for row in claims}
    upstream = {p for row in claims for p in graphs[row.noderun_id].predecessors(row.node_id)}
    outputs: dict[int, dict[str, Any]] = {}
    for row in transitions.read_inputs(ids, upstream) if upstream else []:
        if row.kind == "output":
            outputs.setdefault(row.run_id, {})[row.node_id] = from_json(row.value)
    return {
        row.noderun_id: Given(
            graph=graphs[row.noderun_id],
            run_id=row.run_id,
            node_id=row.node_id,
            input=from_json(row.value),
            upstream={
                p: v
                for p, v in outputs.get(row.run_id, {}).items()
                if p in graphs[row.noderun_id].predecessors(row.node_id)
            },
        )
        for row in claims
    }


def from_json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value
