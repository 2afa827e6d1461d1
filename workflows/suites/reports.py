"""What a suite run says: per case, pass or fail and why, what changed against its origin, and cost.

One reading for the API, the pages, the `workflow test` command and its JUnit file. While
the suite run is not evaluated, `state` is `running` and each case shows its run's status.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from workflows.store.suites import SuiteCaseRun, SuiteRun
from workflows.suites import running

POLL_SECONDS = 0.5


@dataclass(frozen=True)
class Report:
    suite_run: SuiteRun
    cases: list[SuiteCaseRun]

    @property
    def state(self) -> str:
        """running (not evaluated yet), passed or failed."""
        if self.suite_run.evaluated_at is None:
            return "running"
        return "passed" if self.suite_run.passed else "failed"

    @property
    def ended(self) -> int:
        return sum(1 for c in self.cases if c.run.finished_at is not None or c.passed is not None)

    @property
    def failing(self) -> list[SuiteCaseRun]:
        return [c for c in self.cases if c.passed is False]

    @property
    def cost(self) -> Decimal | None:
        costs = [c.cost for c in self.cases if c.cost is not None]
        return sum(costs, Decimal(0)) if costs else None


def report(suite_run_id: int) -> Report:
    suite_run = running.get_suite_run(suite_run_id)
    return Report(suite_run, running.case_runs(suite_run))


def wait_for_report(suite_run_id: int, timeout: float) -> Report:
    """The suite run's report once evaluated, or as it stands when `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        found = report(suite_run_id)
        if found.state != "running" or time.monotonic() >= deadline:
            return found
        time.sleep(POLL_SECONDS)


def failure_message(case: SuiteCaseRun) -> str:
    """The failed expectations of a case, one a line."""
    return "\n".join(str(v["message"]) for v in case.verdicts if not v["passed"])


def case_json(case: SuiteCaseRun) -> dict[str, Any]:
    return {
        "case": case.case_id,
        "name": case.case_name,
        "run": case.run_id,
        "run_status": case.run.status,
        "origin": case.origin_id,
        "calls": case.calls,
        "passed": case.passed,
        "verdicts": case.verdicts,
        "changed": case.changed,
        "cost": None if case.cost is None else str(case.cost),
    }
