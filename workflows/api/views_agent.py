"""Agent steps: the model turns and tool calls of an `llm.agent` node (workflows/agents/steps.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from django.http import HttpRequest
from ninja import Path, Router
from typing_extensions import TypedDict

from workflows.agents import steps as agents, tree as agenttree
from workflows.api.auth import allowed
from workflows.api.parsing import MAX_ID
from workflows.api.schema import refuses
from workflows.runs import actions as runs
from workflows.store.errors import NotFound
from workflows.store.models import NodeRun

router = Router(tags=["runs"])
RunId = Annotated[int, Path(ge=1, le=MAX_ID)]
NodeIdPath = Annotated[str, Path(min_length=1, max_length=64)]


class AgentStepOut(TypedDict):
    seq: int
    number: str  # the run page's numbering: "2" a turn, "2.1" its first tool call (agents/tree.py)
    attempt: int
    kind: str
    status: str
    idempotency_key: str
    started_at: datetime
    finished_at: datetime
    duration_ms: float
    model: str
    finish_reason: str
    input_tokens: int | None
    output_tokens: int | None
    request: Any
    response: Any
    turn_seq: int | None
    call_id: str
    tool: str
    arguments: Any
    result: Any
    error: str
    child_run: int | None


class AgentStepsOut(TypedDict):
    run: int
    node_id: str
    steps: list[AgentStepOut]


@router.get(
    "/runs/{id:run_id}/nodes/{node_id}/steps",
    response=AgentStepsOut,
    auth=allowed("view"),
    summary="Read an agent node's steps",
)
@refuses(404)
def node_steps(request: HttpRequest, run_id: RunId, node_id: NodeIdPath) -> Any:
    """Read the model turns and tool calls of an `llm.agent` node, over all its attempts, in
    order, each with its `number` as the run page shows it (turns 1, 2, 3; a turn's tool calls
    2.1, 2.2): `turn` steps carry the messages added, the answer, model, tokens and finish reason;
    `tool` steps the tool, arguments, result or error, and the turn that asked (`turn_seq`).
    `status` is ok, error (told to the model as the tool's result), failed (the attempt
    failed with it) or waiting (a workflow tool's child run, `child_run`, has not ended).
    Any other node has no steps."""
    run = runs.get_run(run_id)
    node = NodeRun.objects.filter(run=run, node_id=node_id).first()
    if node is None:
        raise NotFound(f"Run {run_id} has no node {node_id!r}.")
    steps = agents.steps_of(node.pk)
    named = agenttree.numbers(steps)
    return {
        "run": run.pk,
        "node_id": node_id,
        "steps": [{**agents.step_json(s), "number": named.get(s.seq, "")} for s in steps],
    }
