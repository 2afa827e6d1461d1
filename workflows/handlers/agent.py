"""`llm.agent` as the editor and the validator see it: a registered name with its schema.

An agent node runs in a worker through its kind (runtime/kinds.py, runtime/agent.py), not
through the function below; its entry here gives the editor its docstring and config
schema, whose `tools` offers every handler registered as a tool (`@node(..., tool=True)`),
kept up to date as modules register more. Always loaded (workflows/apps.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.core.agent import AGENT, agent_schema
from workflows.handlers.registry import Handler, HandlerError, NodeContext, node


def schema_with_tools(registered: Mapping[str, Handler]) -> dict[str, Any]:
    return agent_schema(sorted(name for name, h in registered.items() if h.tool is not None))


@node(AGENT, schema_from=schema_with_tools)
def llm_agent(ctx: NodeContext) -> Any:
    """Let a model work on a task with tools, in turns, until it answers.

    Each model turn and each tool call is recorded as a durable step: a retry, a worker
    killed mid-loop or a replayed dead letter continues after the last finished step,
    without asking the model again or repeating a tool call. An unknown tool or arguments
    off a tool's schema are told to the model as the tool's result. Published workflows
    listed in workflow_tools are tools too: each call runs the workflow as a child run (its
    arguments the workflow's input_schema, its result the child's output), the node waiting
    meanwhile without holding a worker. The output is the final
    text, the finish reason, the model, the numbers of turns and tool calls and the tokens.
    """
    raise HandlerError(f"Node {ctx.node_id!r} is an agent loop; its kind runs it (runtime/agent.py).")
