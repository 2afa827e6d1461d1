"""Budget alerts: `budget.threshold` when a window's spend first reaches ALERT_AT of its
amount, `budget.exhausted` once per exhaustion episode: when a window first refuses a call
for lack of room at the amount it has then.

Each alert is a run event (store/history) on the run whose call crossed the line, so the
run's history shows it and webhook subscriptions of that run's workflow receive it
(integrations/webhooks, event types `budget.threshold` and `budget.exhausted`). Each is
sent once per window: the ledger row's `threshold_at` / `exhausted_at` is set by a
conditional UPDATE in the transaction that settles or refuses the call, so two workers
crossing the line together send one alert. Raising or lowering a budget's amount clears
both marks (manage.save_budget): a new episode, the new amount alerts again when it is reached.

The exhausted mark is set only if the refused call still does not fit the window at the
budget's amount as this statement reads it (committed, so after any raise the refusal waited
for). A reservation's UPDATE that waited for the row lock a raise held (its rearm) decides,
once the raise commits, against the amount of its own snapshot (PostgreSQL re-checks only the
locked row), so a call can be refused at the old amount after the marks were cleared: that
refusal belongs to the episode the raise ended, and alerts nothing (the call is held and the
duty offers it again at the new amount). One place decides: EXHAUSTED_SQL.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db import connection, transaction

from workflows.runtime.admission import Call
from workflows.store.budgets import Budget, BudgetLedger
from workflows.store.history import event, record_events
from workflows.store.models import NodeRun
from workflows.store.statements import table

ALERT_AT = Decimal("0.8")  # of the amount
LEDGERS, BUDGETS = table(BudgetLedger), table(Budget)

THRESHOLD_SQL = f"""
UPDATE {LEDGERS} l SET threshold_at = now()
FROM {BUDGETS} b, unnest(%(ledgers)s::bigint[], %(nodes)s::bigint[]) AS v(ledger_id, node_run_id)
WHERE l.id = v.ledger_id AND b.id = l.budget_id AND l.threshold_at IS NULL
  AND l.spent >= b.amount * %(at)s
RETURNING v.node_run_id, b.id, b.name, b.unit, b.amount, b.window, l.period, l.subject, l.spent, l.reserved
"""

# The ledger row may be new: a refused reservation's transaction (which would have opened it)
# was rolled back. Nothing is written when the call fits the amount as it is now (see the module).
EXHAUSTED_SQL = f"""
INSERT INTO {LEDGERS} (budget_id, period, subject, spent, reserved, calls, updated_at, exhausted_at)
SELECT b.id, %(period)s, %(subject)s, 0, 0, 0, now(), now()
FROM {BUDGETS} b LEFT JOIN {LEDGERS} l
  ON l.budget_id = b.id AND l.period = %(period)s AND l.subject = %(subject)s
WHERE b.id = %(budget)s AND coalesce(l.spent, 0) + coalesce(l.reserved, 0) + %(worst)s > b.amount
ON CONFLICT (budget_id, period, subject) DO UPDATE SET exhausted_at = now()
WHERE {LEDGERS}.exhausted_at IS NULL
RETURNING spent, reserved
"""


def after_settle(settled: list[tuple[int, int]]) -> None:
    """Alert for each ledger among `settled` (ledger id, a node run that spent on it) whose
    spend reached the threshold with this settlement (the settling transaction's cursor)."""
    if not settled:
        return
    with connection.cursor() as cur:
        cur.execute(
            THRESHOLD_SQL,
            {"ledgers": [s[0] for s in settled], "nodes": [s[1] for s in settled], "at": ALERT_AT},
        )
        crossed = cur.fetchall()
    if not crossed:
        return
    nodes = {
        n["id"]: n
        for n in NodeRun.objects.filter(pk__in={c[0] for c in crossed}).values(
            "id", "run_id", "node_id", "attempt"
        )
    }
    record_events(
        *(
            event(
                "budget.threshold",
                nodes[node_run]["run_id"],
                nodes[node_run]["node_id"],
                nodes[node_run]["attempt"],
                {
                    "budget": described(
                        budget_id, name, unit, amount, window, period, subject, spent, reserved
                    )
                },
            )
            for node_run, budget_id, name, unit, amount, window, period, subject, spent, reserved in crossed
        )
    )


def refused(call: Call, budget: Budget, period: str, subject: str, worst: Decimal) -> bool:
    """Alert that `budget`'s window refused `call` (its worst case `worst`), if it is the
    episode's first refusal and the call still does not fit (see the module)."""
    params: dict[str, Any] = {"budget": budget.pk, "period": period, "subject": subject, "worst": worst}
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(EXHAUSTED_SQL, params)
        row = cur.fetchone()
        if row is None:
            return False
        spent, reserved = row
        data = described(
            budget.pk,
            budget.name,
            budget.unit,
            budget.amount,
            budget.window,
            period,
            subject,
            spent,
            reserved,
        )
        record_events(event("budget.exhausted", call.run_id, call.node_id, call.attempt, {"budget": data}))
    return True


def described(
    budget_id: int,
    name: str,
    unit: str,
    amount: Decimal,
    window: str,
    period: str,
    subject: str,
    spent: Decimal,
    reserved: Decimal,
) -> dict[str, Any]:
    """What an alert says of its budget window (the webhook payload's `data.budget`)."""
    return {
        "id": budget_id,
        "name": name,
        "unit": unit,
        "amount": plain(amount),
        "window": window,
        "period": period,
        "subject": subject,
        "spent": plain(spent),
        "reserved": plain(reserved),
        "percent": round(float(spent / amount * 100), 1) if amount else None,
        "url": f"/api/v1/budgets/{budget_id}",
    }


def plain(value: Decimal) -> str:
    return format(value.normalize(), "f") if value else "0"


def rearm(budget: Budget) -> None:
    """Clear the alert marks of a budget's windows (its amount changed)."""
    BudgetLedger.objects.filter(budget=budget).update(threshold_at=None, exhausted_at=None)
