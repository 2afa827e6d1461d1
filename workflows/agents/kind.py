"""The agent loop as a node kind (`llm.agent`): claimed and retried as a task, its model turns
and tool calls durable steps under the node (loop.py), so an attempt continues after the
last step any earlier attempt recorded."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from workflows import handlers
from workflows.agents import loop, steps
from workflows.core.graph import AGENT, Node
from workflows.runtime.kinds import Task


class AgentLoop(Task):
    name = AGENT

    def execute(self, node: Node, ctx: handlers.NodeContext) -> Any:
        return loop.run_agent(node, ctx)

    def began(self, node: Node, ctx: handlers.NodeContext, job_started: datetime) -> datetime:
        return steps.attempt_began(ctx.node_run_id, ctx.attempt, job_started)

    def is_io_bound(self, node: Node) -> bool:
        return True  # model turns and tool calls: waits, each a durable step

    async def execute_on_loop(self, node: Node, ctx: handlers.NodeContext) -> Any:
        return await loop.run_agent_on_loop(node, ctx)
