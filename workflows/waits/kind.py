"""The wait kinds (`human.approval`, `wait.event`, `wait.timer`) as node kinds: claimed into
`waiting` with their Wait row (waiting.py), holding no worker."""

from __future__ import annotations

from workflows.core.states import NodeStatus
from workflows.runtime import jobs
from workflows.runtime.kinds import HoldsNoWorker
from workflows.waits import waiting


class Waiting(HoldsNoWorker):
    def __init__(self, name: str) -> None:
        self.name = name

    def claim(self, rows: list[jobs.Ready], workers: int, status: NodeStatus) -> int:
        return waiting.enter_waits(rows, status)
