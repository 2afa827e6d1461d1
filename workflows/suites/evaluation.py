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
the case's origin (the comparison's rule, forks/comparison.py, over node rows read once for
the whole suite run), and the run's LLM cost. A judge's own call is made
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
from workflows.core.outputdiff import diff_json
from workflows.core.states import RUN_FINISHED, NodeStatus, RunStatus
from workflows.handlers.registry import HandlerError
from workflows.llm import client, providers
from workflows.store.graphs import load_graph
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
        cases = list(suite_run.cases.select_related("run", "origin").order_by("id"))
        rows = node_rows(cases)
        costs = run_costs([c.run_id for c in cases])
        for case in cases:
            judge_case(case, rows, costs.get(case.run_id))
        SuiteCaseRun.objects.bulk_update(cases, ["passed", "verdicts", "changed", "cost"])
        suite_run.passed = all(c.passed for c in cases)
        suite_run.summary = summary(cases)
        suite_run.evaluated_at = timezone.now()
        suite_run.save(update_fields=["passed", "summary", "evaluated_at"])
    return 1


def node_rows(cases: list[SuiteCaseRun]) -> dict[int, dict[str, tuple[str, Any]]]:
    """run id -> node id -> (status, output), for every case run and origin, in one query."""
    ids = {c.run_id for c in cases} | {c.origin_id for c in cases if c.origin_id is not None}
    rows: dict[int, dict[str, tuple[str, Any]]] = {run_id: {} for run_id in ids}
    for run_id, node_id, status, output in NodeRun.objects.filter(run_id__in=ids).values_list(
        "run_id", "node_id", "status", "output"
    ):
        rows[run_id][node_id] = (status, output)
    return rows


def run_costs(run_ids: list[int]) -> dict[int, Decimal | None]:
    """run id -> the sum of its LLM calls' cost, in one query."""
    found = LLMCall.objects.filter(run_id__in=run_ids).values("run_id").annotate(c=Sum("cost"))
    return {r["run_id"]: r["c"] for r in found}


def judge_case(case: SuiteCaseRun, rows: dict[int, dict[str, tuple[str, Any]]], cost: Decimal | None) -> None:
    run = case.run
    graph = load_graph(run.version_id)
    mine = {n: row for n, row in rows[run.pk].items() if n in graph.nodes}
    nodes = {n: output for n, (status, output) in mine.items() if status == NodeStatus.SUCCEEDED}
    final = {n: nodes[n] for n in graph.order if not graph.successors(n) and n in nodes}
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
    origin = rows.get(case.origin_id) if case.origin_id is not None else None
    case.changed = [] if origin is None else changed_nodes(case, origin, mine)
    case.cost = cost


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


def changed_nodes(
    case: SuiteCaseRun, origin: dict[str, tuple[str, Any]], mine: dict[str, tuple[str, Any]]
) -> list[str]:
    """The nodes whose status or output differ from the origin's, by the comparison's rule
    (forks/comparison.py: same = status alike and no JSON difference; a node of one side only
    changed), in the origin's graph order, then the nodes only the case run's version has."""
    assert case.origin is not None, "rows are read only for an origin that exists"
    before, after = load_graph(case.origin.version_id), load_graph(case.run.version_id)
    theirs = {n: row for n, row in origin.items() if n in before.nodes}
    order = list(before.order) + [n for n in after.order if n not in before.nodes]
    return [n for n in order if is_changed(theirs.get(n), mine.get(n))]


def is_changed(left: tuple[str, Any] | None, right: tuple[str, Any] | None) -> bool:
    if left is None or right is None:
        return left is not right
    return left[0] != right[0] or not diff_json(left[1], right[1], 1).is_same


def summary(cases: list[SuiteCaseRun]) -> dict[str, Any]:
    costs = [c.cost for c in cases if c.cost is not None]
    return {
        "cases": len(cases),
        "passed": sum(1 for c in cases if c.passed),
        "failed": sum(1 for c in cases if not c.passed),
        "changed": sum(1 for c in cases if c.changed),
        "cost": f"{sum(costs, Decimal(0)):f}" if costs else None,
    }
