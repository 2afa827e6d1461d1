"""The child-run kind (`workflow.run`): claimed into `waiting` with its child run started in
the same transaction (start.py), holding no worker until the child ends."""

from __future__ import annotations

from workflows.children import start
from workflows.core.graph import CHILD
from workflows.core.states import NodeStatus
from workflows.runtime import jobs
from workflows.runtime.kinds import HoldsNoWorker


class ChildRunKind(HoldsNoWorker):
    name = CHILD

    def claim(self, rows: list[jobs.Ready], workers: int, status: NodeStatus) -> int:
        return start.start_children(rows, status)
