"""The ledgers of spend budgets: which budgets a call falls under, its reservation, its settlement.

A call reserves its worst case against every budget that applies to it, in ONE transaction:
per budget (in id order, so two workers never wait on each other in a cycle) the window's
ledger row is created if missing, then one conditional UPDATE adds the reservation only if
`spent + reserved + worst <= amount` (the amount read in the same statement, so a budget
raised before it began counts; one that waited for the row lock a raise held decides against
the amount it began with, and the call refused so is held and offered again: alerts.py says
why that refusal alerts nothing). The UPDATE takes the row's lock: a second worker racing for the
last of a budget waits for the first to commit, then re-reads the row and fails the
condition. One budget without room rolls the whole reservation back (NoRoom names it).

After the call, `settle` moves each reservation out of `reserved` and adds the real usage
to `spent` (the worst case when the provider reported no usage: the safe side); a call that
failed is released and counts nothing, as its LLMCall row counts no tokens. A reservation
whose attempt is gone (its worker killed mid-call) is settled at its full worst case by
`settle_lost`: the call may have been paid for.

Which budgets exist is read on every call's admission, and most calls fall under none: the
rows are remembered while the budgets' epoch holds (runtime/epochs.py: replaced whenever a
budget is saved or deleted, so a new budget counts from the next call in every process; a
change no signal sees within FRESH_FOR seconds). A call under no budget then costs no
statement. The ledgers themselves are never remembered: every reservation is decided in
PostgreSQL, as above.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from workflows.core import budgets as core
from workflows.core.states import NodeStatus as N
from workflows.llm.prices import price_of
from workflows.runtime import epochs
from workflows.runtime.admission import Call
from workflows.store.models import Budget, BudgetHold, BudgetLedger, BudgetReservation, Run, RunApiKey
from workflows.store.statements import NODES, table

from . import alerts

LEDGERS, BUDGETS, RESERVATIONS = table(BudgetLedger), table(Budget), table(BudgetReservation)

OPEN_SQL = f"""
INSERT INTO {LEDGERS} (budget_id, period, subject, spent, reserved, calls, updated_at)
VALUES (%(budget)s, %(period)s, %(subject)s, 0, 0, 0, now())
ON CONFLICT (budget_id, period, subject) DO NOTHING
"""

# The one decision of whether a call fits: in the row's lock, against the amount as it is now;
# the reservation row is written by the same statement, so the lock is held one statement
# (and the commit) per budget.
RESERVE_SQL = f"""
WITH l AS (
UPDATE {LEDGERS} l SET reserved = l.reserved + %(amount)s, updated_at = now()
FROM {BUDGETS} b
WHERE b.id = l.budget_id AND l.budget_id = %(budget)s AND l.period = %(period)s AND l.subject = %(subject)s
  AND (%(over)s OR l.spent + l.reserved + %(amount)s <= b.amount)
RETURNING l.id
)
INSERT INTO {RESERVATIONS} (ledger_id, node_run_id, attempt, amount, overspend, created_at)
SELECT l.id, %(node_run)s, %(attempt)s, %(amount)s, %(over)s, now() FROM l
RETURNING id
"""

# Summed per ledger first: an UPDATE ... FROM changes a row once however many source rows
# join it, so two reservations of one ledger settled together (the lost ones of a killed
# worker, say) must arrive as one row. Returns each ledger changed with a node run that spent
# on it (alerts.py reads them).
SETTLE_SQL = f"""
WITH r AS (
UPDATE {RESERVATIONS} r SET settled_at = now(), spent = v.spent
FROM unnest(%(ids)s::bigint[], %(spent)s::numeric[]) AS v(id, spent)
WHERE r.id = v.id AND r.settled_at IS NULL
RETURNING r.ledger_id, r.amount, r.spent, r.node_run_id
), per_ledger AS (
SELECT ledger_id, sum(amount) AS amount, sum(spent) AS spent, count(*) AS calls, min(node_run_id) AS node_run_id
FROM r GROUP BY ledger_id
)
UPDATE {LEDGERS} l SET reserved = l.reserved - p.amount, spent = l.spent + p.spent,
    calls = l.calls + p.calls, updated_at = now()
FROM per_ledger p WHERE l.id = p.ledger_id
RETURNING l.id, p.node_run_id
"""

# A reservation is in flight while its attempt runs (or a direct job's queued attempt does).
LOST_SQL = f"""
SELECT r.id, r.amount FROM {RESERVATIONS} r JOIN {NODES} n ON n.id = r.node_run_id
WHERE r.settled_at IS NULL AND r.created_at < %(before)s
  AND NOT (n.attempt = r.attempt AND n.status IN ('{N.RUNNING}', '{N.QUEUED}'))
ORDER BY r.id LIMIT 500
"""

LOST_AFTER_SECONDS = 30.0  # a reservation younger than this may belong to a call being recorded


@dataclass(frozen=True)
class Applies:
    """A budget that applies to a call: its ledger's period and subject, and the call's worst case."""

    budget: Budget
    period: str
    subject: str
    worst: Decimal | None  # None: a cost budget and no price for the model


@dataclass(frozen=True)
class Ticket:
    """A reserved call: its reservations (id, budget unit, amount) and what prices it."""

    reservations: list[tuple[int, str, Decimal]]
    provider: str
    model: str


class NoRoom(Exception):
    """A call that does not fit `applies` (over its budget, or no price under a cost budget)."""

    def __init__(self, applies: Applies) -> None:
        super().__init__(applies.budget.name)
        self.applies = applies

    @property
    def reason(self) -> str:
        return core.NO_PRICE if self.applies.worst is None else core.OVER


def applicable(
    budgets: Sequence[Budget],
    workflow_id: int,
    run_input: Any,
    run_id: int,
    now: datetime,
    api_key_id: int | None = None,
) -> list[tuple[Budget, str, str]]:
    """(budget, period, subject) of each budget that covers a call of this run (started by
    `api_key_id`, if by a key), in id order."""
    found = []
    for budget in sorted(budgets, key=lambda b: b.pk):
        subject = ""
        if budget.scope == core.WORKFLOW and budget.workflow_id != workflow_id:
            continue
        if budget.scope == core.API_KEY and (api_key_id is None or budget.api_key_id != api_key_id):
            continue
        if budget.scope == core.TENANT:
            value = core.tenant_of(run_input, budget.tenant_key)
            if value is None or (budget.tenant_value and value != budget.tenant_value):
                continue
            subject = value
        found.append((budget, core.period_of(budget.window, run_id, now), subject))
    return found


def price(provider: str, model: str) -> core.Price | None:
    row = price_of(provider, model)
    return None if row is None else core.Price(row.input_per_million, row.output_per_million)


FRESH_FOR = 5.0  # seconds: the bound for budget changes no signal reports
EPOCH = epochs.Epoch("sy:budgets:epoch", FRESH_FOR)
ALL_BUDGETS: epochs.Remembered[list[Budget]] = epochs.Remembered(
    EPOCH, lambda _: list(Budget.objects.all()), at_most=1
)


def watch_changes() -> None:
    """Replace the budgets' epoch when a budget changes (workflows/apps.py)."""
    EPOCH.watch((Budget,), "budgets")


def worst_cases(call: Call, output_tokens: int, now: datetime) -> list[Applies]:
    """The budgets that apply to `call`, each with the call's worst case in its unit."""
    budgets = ALL_BUDGETS.get(None)
    if not budgets:
        return []
    run = Run.objects.values("workflow_id", "input").get(pk=call.run_id)
    key = None
    if any(b.scope == core.API_KEY for b in budgets):
        key = RunApiKey.objects.filter(run_id=call.run_id).values_list("api_key_id", flat=True).first()
    covered = applicable(budgets, run["workflow_id"], run["input"], call.run_id, now, key)
    if not covered:
        return []
    prompt = core.prompt_bound(call.messages, call.tools)
    priced = price(call.provider, call.model) if any(b.unit == core.COST for b, _, _ in covered) else None
    return [
        Applies(budget, period, subject, core.amount_of(budget.unit, prompt, output_tokens, priced))
        for budget, period, subject in covered
    ]


def reserve(call: Call, applies: list[Applies]) -> Ticket:
    """Reserve the call's worst case against every budget in `applies`, all or none; raise
    NoRoom naming the first that has no room (a cost budget without a price: always)."""
    allowed = set(
        BudgetHold.objects.filter(
            node_run_id=call.node_run_id, attempt=call.attempt, allowed=True
        ).values_list("budget_id", flat=True)
    )
    for item in applies:
        if item.worst is None:
            raise NoRoom(item)
    made: list[tuple[int, str, Decimal]] = []
    with transaction.atomic(), connection.cursor() as cur:
        for item in applies:
            params: dict[str, Any] = {
                "budget": item.budget.pk,
                "period": item.period,
                "subject": item.subject,
                "amount": item.worst,
                "over": item.budget.pk in allowed,
                "node_run": call.node_run_id,
                "attempt": call.attempt,
            }
            cur.execute(OPEN_SQL, params)
            cur.execute(RESERVE_SQL, params)
            row = cur.fetchone()
            if row is None:
                raise NoRoom(item)  # rolls back the reservations made before it
            made.append((row[0], item.budget.unit, Decimal(item.worst or 0)))
        if allowed:  # an overspend a person allowed serves one call
            BudgetHold.objects.filter(
                node_run_id=call.node_run_id, attempt=call.attempt, allowed=True
            ).update(allowed=False)
    return Ticket(made, call.provider, call.model)


def settle(ticket: Ticket, input_tokens: int | None, output_tokens: int | None, ok: bool) -> None:
    """Replace the ticket's reservations by what the call spent (see the module's docstring)."""
    if not ticket.reservations:
        return
    known = ok and input_tokens is not None and output_tokens is not None
    priced = price(ticket.provider, ticket.model) if known else None
    spent = []
    for _, unit, amount in ticket.reservations:
        used = core.amount_of(unit, input_tokens or 0, output_tokens or 0, priced) if known else None
        spent.append(Decimal(0) if not ok else amount if used is None else used)
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(SETTLE_SQL, {"ids": [r[0] for r in ticket.reservations], "spent": spent})
        alerts.after_settle(cur.fetchall())


def settle_lost(now: datetime | None = None) -> int:
    """Settle at their worst case the reservations of attempts that no longer run; return how many."""
    before = (now or timezone.now()) - timedelta(seconds=LOST_AFTER_SECONDS)
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(LOST_SQL, {"before": before})
        lost = cur.fetchall()
        if lost:
            cur.execute(SETTLE_SQL, {"ids": [r[0] for r in lost], "spent": [r[1] for r in lost]})
            alerts.after_settle(cur.fetchall())
    return len(lost)


def left_in(budget: Budget, period: str, subject: str) -> Decimal:
    """What is left of a budget's window for a subject now: amount - spent - reserved."""
    row = BudgetLedger.objects.filter(budget=budget, period=period, subject=subject).first()
    if row is None:
        return budget.amount
    return budget.amount - row.spent - row.reserved
