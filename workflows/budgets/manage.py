"""Budgets as people see and change them: save (every field checked, named when refused),
delete, the figures of each (spent, reserved, left, held), and the refusal of a run at start.

A run is refused at start (Conflict: a 409 naming the budget) when a budget over a day or a
month that would cover its calls has nothing left in its current window: global budgets,
its workflow's, its API key's, and the tenant budgets whose field its input carries. A budget per run cannot
be spent before its run starts, and is never a reason to refuse one. Starts read which
budgets exist where the calls' gate does (ledger.ALL_BUDGETS, under the budgets' epoch): a
budget saved or deleted in any process counts from the next start in every process.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from workflows.core import budgets as core
from workflows.core.burn import Burn, burn
from workflows.core.definition import Issue
from workflows.store import audit
from workflows.store.errors import Conflict, Invalid, NotFound
from workflows.store.models import (
    ApiKey,
    Budget,
    BudgetHold,
    BudgetLedger,
    BudgetReservation,
    RunApiKey,
    Workflow,
)

from . import alerts, ledger

FIELDS = (
    "name",
    "unit",
    "amount",
    "window",
    "scope",
    "workflow",
    "api_key",
    "tenant_key",
    "tenant_value",
    "policy",
)


def save_budget(data: dict[str, Any], budget_id: int | None = None, actor: Any = None) -> Budget:
    """Create a budget (or change `budget_id`) from its fields; raise Invalid naming each bad one.

    `workflow` is a workflow's slug. Raising a budget takes effect at the next call; the
    schedulers' duty offers the attempts it held again within OFFER_SECONDS.
    """
    data = {k: data.get(k) for k in FIELDS}
    data["tenant_key"] = data["tenant_key"] or ""
    data["tenant_value"] = str(data["tenant_value"] or "")
    data["policy"] = data["policy"] or core.WAIT
    problems = core.check_budget(data)
    workflow = None
    if data["scope"] == core.WORKFLOW and data["workflow"]:
        workflow = Workflow.objects.filter(slug=str(data["workflow"])).first()
        if workflow is None:
            problems.append(Issue("workflow", f"workflow {data['workflow']!r} does not exist."))
    key = None
    if data["scope"] == core.API_KEY and data["api_key"]:
        key = ApiKey.objects.filter(prefix=str(data["api_key"])).first()
        if key is None:
            problems.append(Issue("api_key", f"no API key has the prefix {data['api_key']!r}."))
    if len(data["tenant_value"]) > 200:
        problems.append(Issue("tenant_value", "tenant_value must be at most 200 characters."))
    taken = Budget.objects.filter(name=str(data["name"] or "").strip())
    if budget_id is not None:
        taken = taken.exclude(pk=budget_id)
    if isinstance(data["name"], str) and taken.exists():
        problems.append(Issue("name", f"a budget named {data['name'].strip()!r} already exists."))
    if problems:
        raise Invalid(" ".join(p.message for p in problems), problems)
    with transaction.atomic():
        budget = Budget() if budget_id is None else get_budget(budget_id, lock=True)
        before = budget.amount if budget_id is not None else None
        budget.name = str(data["name"]).strip()
        budget.unit, budget.window, budget.scope = data["unit"], data["window"], data["scope"]
        budget.amount = core.parse_amount(data["amount"]) or Decimal(0)
        if before is not None and budget.amount != before:
            alerts.rearm(budget)
        budget.workflow, budget.api_key = workflow, key
        budget.tenant_key, budget.tenant_value = data["tenant_key"], data["tenant_value"]
        budget.policy = data["policy"]
        budget.save()  # its signal replaces the budgets' epoch (ledger.EPOCH): every process reads them again
        audit.record(actor, "budget.save" if budget_id else "budget.create", budget, **as_dict(budget))
    return budget


def delete_budget(budget_id: int, actor: Any = None) -> None:
    """Delete a budget; the attempts it held are offered again by the next duty round."""
    with transaction.atomic():
        budget = get_budget(budget_id, lock=True)
        audit.record(actor, "budget.delete", budget, name=budget.name)
        budget.delete()


def get_budget(budget_id: int, lock: bool = False) -> Budget:
    rows = (
        Budget.objects.select_for_update() if lock else Budget.objects.select_related("workflow", "api_key")
    )
    budget = rows.filter(pk=budget_id).first()
    if budget is None:
        raise NotFound(f"Budget {budget_id} does not exist.")
    return budget


def as_dict(budget: Budget) -> dict[str, Any]:
    return {
        "id": budget.pk,
        "name": budget.name,
        "unit": budget.unit,
        "amount": plain(budget.amount),
        "window": budget.window,
        "scope": budget.scope,
        "workflow": budget.workflow.slug if budget.workflow else None,
        "api_key": budget.api_key.prefix if budget.api_key else None,
        "tenant_key": budget.tenant_key,
        "tenant_value": budget.tenant_value,
        "policy": budget.policy,
    }


def plain(value: Decimal) -> str:
    return format(value.normalize(), "f") if value else "0"


@dataclass(frozen=True)
class Figures:
    """One budget's window now: spent, reserved, left (summed over its subjects), held attempts."""

    budget: Budget
    period: str
    spent: Decimal
    reserved: Decimal
    left: Decimal | None  # None: per run or per tenant value, where no single figure applies
    held: int
    resets_at: datetime | None

    def as_dict(self) -> dict[str, Any]:
        return {
            **as_dict(self.budget),
            "period": self.period,
            "spent": plain(self.spent),
            "reserved": plain(self.reserved),
            "left": None if self.left is None else plain(self.left),
            "held": self.held,
            "resets_at": self.resets_at.isoformat() if self.resets_at else None,
        }


def figures(budgets: list[Budget] | None = None, now: datetime | None = None) -> list[Figures]:
    """The figures of each budget (all by default) in its current window."""
    now = now or timezone.now()
    budgets = list(Budget.objects.select_related("workflow", "api_key")) if budgets is None else budgets
    held = dict(
        BudgetHold.objects.filter(closed_at__isnull=True, budget__in=budgets)
        .values("budget_id")
        .annotate(n=Count("id"))
        .values_list("budget_id", "n")
    )
    found = []
    for budget in budgets:
        period = current_period(budget, now)
        rows = BudgetLedger.objects.filter(budget=budget)
        rows = (
            rows.filter(period__startswith="run:")
            if budget.window == core.RUN
            else rows.filter(period=period)
        )
        spent = sum((r.spent for r in rows), Decimal(0))
        reserved = sum((r.reserved for r in rows), Decimal(0))
        single = budget.window != core.RUN and not (budget.scope == core.TENANT and not budget.tenant_value)
        left = budget.amount - spent - reserved if single else None
        found.append(
            Figures(
                budget,
                period,
                spent,
                reserved,
                left,
                held.get(budget.pk, 0),
                core.resets_at(budget.window, now),
            )
        )
    return found


def burns(found: list[Figures], now: datetime | None = None) -> dict[int, Burn]:
    """The burn chart of each budget whose window is a day or a month and has one figure (not
    one per tenant value): its settled spends in the current window, by budget id."""
    now = now or timezone.now()
    charts = {}
    for f in found:
        start, end = core.starts_at(f.budget.window, now), core.resets_at(f.budget.window, now)
        if start is None or end is None or f.left is None:
            continue
        spends = (
            BudgetReservation.objects.filter(
                ledger__budget=f.budget, ledger__period=f.period, settled_at__isnull=False
            )
            .order_by("settled_at")
            .values_list("settled_at", "spent")
        )
        charts[f.budget.pk] = burn(
            start, end, now, f.budget.amount, [(at, s or Decimal(0)) for at, s in spends if at is not None]
        )
    return charts


def current_period(budget: Budget, now: datetime) -> str:
    """The window's period key now ("run:*" for a per-run budget: every run's ledger)."""
    return "run:*" if budget.window == core.RUN else core.period_of(budget.window, 0, now)


def start_budgets() -> list[Budget]:
    """Every budget, as starts read them: the calls' gate's memory (ledger.ALL_BUDGETS). A
    start is a hot path (bulk starts feed thousands of runs a second): one Redis GET while
    no budget changed, the table read again from the next start after any change."""
    return ledger.ALL_BUDGETS.get(None)


def key_to_record(api_key_id: int | None) -> int | None:
    """The key to record with the runs it starts: only while a budget covers keys' runs, so
    that starts pay for no extra statement otherwise. A key's budget thus covers the runs
    its key starts from the next start after it is saved, in every process."""
    if api_key_id is None or not any(b.scope == core.API_KEY for b in start_budgets()):
        return None
    return api_key_id


def check_start(
    workflow: Workflow, run_input: Any, api_key_id: int | None = None, now: datetime | None = None
) -> None:
    """Refuse a run (started by `api_key_id`, if by a key) whose spend is exhausted (see the
    module); raise Conflict naming the budget."""
    check_starts(workflow, [run_input], api_key_id, now)


def check_starts(
    workflow: Workflow, inputs: list[Any], api_key_id: int | None = None, now: datetime | None = None
) -> None:
    """`check_start` for a batch of runs: each budget window read once, whatever the count."""
    budgets = [b for b in start_budgets() if b.window != core.RUN]
    if not budgets:
        return
    now = now or timezone.now()
    windows = {
        (budget.pk, period, subject): (budget, period, subject)
        for run_input in inputs
        for budget, period, subject in ledger.applicable(budgets, workflow.pk, run_input, 0, now, api_key_id)
    }
    for budget, period, subject in windows.values():
        if ledger.left_in(budget, period, subject) <= 0:
            whose = f" for {budget.tenant_key} {subject!r}" if subject else ""
            raise Conflict(
                f"Budget {budget.name!r} ({plain(budget.amount)} {budget.unit} per {budget.window}{whose}) "
                f"is spent; no run of {workflow.slug!r} starts until it is raised or its window resets "
                f"at {core.resets_at(budget.window, now):%Y-%m-%d %H:%M} UTC."
            )


def remember_key(run_ids: list[int], api_key_id: int | None) -> None:
    """Record the key that started these runs (call in the transaction that creates them)."""
    if api_key_id is not None and run_ids:
        RunApiKey.objects.bulk_create(RunApiKey(run_id=run_id, api_key_id=api_key_id) for run_id in run_ids)
