"""The one place a suite run is judged: once, after its last case run has ended.

A scheduler duty (`evaluate_ended`, registered in workflows/apps.py, in every scheduler)
finds the suite runs not yet evaluated whose case runs have all ended, and evaluates each in
one transaction that first locks its row (`SELECT ... FOR UPDATE SKIP LOCKED` where
`evaluated_at IS NULL`): two schedulers evaluate a suite run once; a scheduler killed
mid-way leaves it unevaluated (the transaction rolls back) and the next tick does it again.
Not an exclusive duty: those run under the reconciler's lock, which a judge's call (up to
JUDGE_TIMEOUT_SECONDS) would outlast, letting a second scheduler send webhooks at once. Nothing is decided in a web request: the case runs end on the workers
and the schedulers, killed or not, and the suite run follows from PostgreSQL alone.

Per case: each expectation's verdict (core/expectations.py; a judge is an LLM call here,
marked `judge` in the report; its failure to answer fails the expectation, naming why), a
run that did not succeed fails the case, the nodes whose status or output changed against
the case's origin (forks/comparison.py), and the run's LLM cost. A judge's own call is made
from the scheduler, outside any node: it is not recorded as a run's LLM call, nor priced.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from workflows.core import expectations as ex
from workflows.core.states import RUN_FINISHED, NodeStatus, RunStatus
from workflows.forks.comparison import compare_runs
from workflows.handlers.registry import HandlerError
from workflows.llm import client, providers
from workflows.runs import actions as runs
from workflows.store.models import LLMCall, NodeRun, Run
from workflows.store.suites import SuiteCaseRun, SuiteRun

EVERY_SECONDS = 1.0
JUDGE_TIMEOUT_SECONDS = 30.0  # a judge's call holds its scheduler's tick: kept short
BATCH = 20


def evaluate_ended() -> int:
    """Evaluate the suite runs whose case runs have all ended; return how many were evaluated."""
    unended = Run.objects.exclude(status__in=RUN_FINISHED).filter(suite_case__suite_run_id__isnull=False)
    ready = (
        SuiteRun.objects.filter(evaluated_at__isnull=True)
        .exclude(pk__in=unended.values("suite_case__suite_run_id"))
        .order_by("id")
        .values_list("pk", flat=True)[:BATCH]
    )
    return sum(evaluate(pk) for pk in list(ready))


def evaluate(suite_run_id: int) -> int:
    """Judge one suite run, once (1), or nothing if another process holds or finished it (0)."""
    with transaction.atomic():
        suite_run = (
            SuiteRun.objects.select_for_update(skip_locked=True)
            .filter(pk=suite_run_id, evaluated_at__isnull=True)
            .first()
        )
        if suite_run is None:
            return 0
        cases = list(suite_run.cases.select_related("run").order_by("id"))
        for case in cases:
            judge_case(case)
        SuiteCaseRun.objects.bulk_update(cases, ["passed", "verdicts", "changed", "cost"])
        suite_run.passed = all(c.passed for c in cases)
        suite_run.summary = summary(cases)
        suite_run.evaluated_at = timezone.now()
        suite_run.save(update_fields=["passed", "summary", "evaluated_at"])
    return 1


def judge_case(case: SuiteCaseRun) -> None:
    run = case.run
    final = runs.run_output(run)
    nodes = dict(
        NodeRun.objects.filter(run=run, status=NodeStatus.SUCCEEDED).values_list("node_id", "output")
    )
    verdicts = []
    if run.status != RunStatus.SUCCEEDED:
        verdicts.append(
            {"expectation": "the run succeeds", "passed": False, "message": run_failure(run), "judge": False}
        )
    for item in case.expectations:
        try:
            expectation = ex.parse(item)
        except ex.BadExpectation as exc:  # written past the checks (the admin): fail it, naming why
            verdicts.append(
                {"expectation": str(item)[:100], "passed": False, "message": str(exc), "judge": False}
            )
            continue
        verdict = (
            judge(expectation, final, nodes, case)
            if expectation.is_judge
            else ex.check(expectation, final, nodes)
        )
        verdicts.append(
            {
                "expectation": expectation.describe(),
                "passed": verdict.passed,
                "message": verdict.message,
                "judge": expectation.is_judge,
            }
        )
    case.verdicts = verdicts
    case.passed = all(v["passed"] for v in verdicts)
    case.changed = changed_nodes(case)
    case.cost = LLMCall.objects.filter(run_id=run.pk).aggregate(c=Sum("cost"))["c"]


def run_failure(run: Run) -> str:
    dead = NodeRun.objects.filter(run=run, status=NodeStatus.DEAD).order_by("finished_at").first()
    at = (
        f" at node {dead.node_id!r}: {dead.error.strip().splitlines()[-1][:300]}"
        if dead and dead.error
        else ""
    )
    return f"the run {run.status}{at}."


def judge(
    expectation: ex.Expectation, final: dict[str, Any], nodes: dict[str, Any], case: SuiteCaseRun
) -> ex.Verdict:
    """Ask the judge's model to grade the target against the rubric."""
    target = ex.target_of(expectation, final, nodes)
    if target is ex.MISSING:
        return ex.Verdict(False, f"{expectation.describe()} (judge): nothing to judge.")
    try:
        endpoint = providers.resolve(expectation.provider, expectation.model)
        answer = client.complete(
            endpoint,
            ex.judge_messages(expectation, target),
            idempotency_key=f"suite-case:{case.pk}:judge:{json.dumps(expectation.rubric)[:40]}",
            timeout_seconds=JUDGE_TIMEOUT_SECONDS,
            where=f"the judge of case {case.case_name!r}",
        )
    except HandlerError as exc:
        return ex.Verdict(False, f"{expectation.describe()} (judge): the judge could not answer: {exc}")
    return ex.judge_verdict(expectation, answer.text)


def changed_nodes(case: SuiteCaseRun) -> list[str]:
    """The nodes whose status or output differ from the case's origin's ([] without an origin)."""
    if case.origin_id is None:
        return []
    comparison = compare_runs(case.origin_id, case.run_id)
    return [n.node_id for n in comparison.nodes if n.verdict != "same"]


def summary(cases: list[SuiteCaseRun]) -> dict[str, Any]:
    costs = [c.cost for c in cases if c.cost is not None]
    return {
        "cases": len(cases),
        "passed": sum(1 for c in cases if c.passed),
        "failed": sum(1 for c in cases if not c.passed),
        "changed": sum(1 for c in cases if c.changed),
        "cost": f"{sum(costs, Decimal(0)):f}" if costs else None,
    }
