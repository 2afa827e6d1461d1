"""Attempts held by a spend budget: holding them, offering them again, a person's decision.

A held attempt is a waiting node like any other (runtime/transitions `hold_attempt`:
running -> waiting, no attempt spent, no worker held) with a Wait row of kind "budget" (the
pages and the cancel path see it as they see every wait) and a BudgetHold row that says
which budget, why (`budget`: over it; `price`: a cost budget and no price for the model)
and what the call needs (its worst case). All of it is in PostgreSQL: a Redis flush or a
kill -9 of every process leaves the node held, and the scheduler's duty offers it again.

`offer_held` (a scheduler duty, every OFFER_SECONDS) releases held attempts whose reason
has cleared, highest effective priority first (the run's, aged by the time held, as
capacity.py offers its held nodes), then oldest: for each budget window, as many as
its room left covers by their recorded need (the budget raised, the window reset), those
held for a price once the price exists, those of a budget deleted since, and those a person
allowed over the budget (once: `allow_once`). Releasing queues the same attempt again with a
new job (`transitions.release_held`); the worker makes its call again, and that call's
reservation is the only authority: offering one the room does not cover in the end only
holds it again. Holds whose node no longer waits at that attempt (its run was cancelled)
are closed.

The room left is the window's amount less its spent and reserved, less the needs of the
attempts earlier rounds released that have not reserved yet (PENDING_SQL: queued or
running at that attempt, no reservation since the release, released within PENDING_SECONDS):
without them a round 0.5 s after a raise saw the room the last round had already given
away (those attempts still queued on a loaded machine) and released again, and the calls
then refused at the raised amount were held again and alerted the budget exhausted.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from workflows.core import budgets as core, priorities
from workflows.core.states import NodeStatus as N
from workflows.runtime import jobs, transitions
from workflows.runtime.admission import Call
from workflows.store import audit
from workflows.store.errors import Conflict, NotFound
from workflows.store.graphs import load_graph
from workflows.store.models import BudgetHold, BudgetReservation, NodeRun, Run, RunEvent, Wait
from workflows.store.statements import NODES, table

from . import ledger

OFFER_SECONDS = 0.5
WAIT_KIND = "budget"  # the Wait rows of held attempts
PENDING_SECONDS = 60.0  # a released attempt not reserved by then no longer counts against the room
HOLDS, RESERVATIONS = table(BudgetHold), table(BudgetReservation)

# The needs of a window's released attempts that have not reserved yet (see the module). Read
# before the ledger: one that reserves in between is counted twice (released a round later),
# never missed.
PENDING_SQL = f"""
SELECT coalesce(sum(h.need), 0) FROM {HOLDS} h JOIN {NODES} n ON n.id = h.node_run_id AND n.attempt = h.attempt
WHERE h.budget_id = %(budget)s AND h.subject = %(subject)s AND (%(run)s::bigint IS NULL OR h.run_id = %(run)s)
  AND h.outcome = 'released' AND h.closed_at >= %(since)s AND n.status IN ('{N.QUEUED}', '{N.RUNNING}')
  AND NOT EXISTS (
    SELECT 1 FROM {RESERVATIONS} r
    WHERE r.node_run_id = h.node_run_id AND r.attempt = h.attempt AND r.created_at >= h.closed_at
  )
"""


def hold(call: Call, refused: ledger.NoRoom, now: datetime) -> bool:
    """Hold the call's attempt on the budget that refused it; return whether it still ran."""
    applies = refused.applies
    budget = applies.budget
    with transaction.atomic():
        if not transitions.hold_attempt(call.node_run_id, call.attempt):
            return False
        run = Run.objects.only("workflow_id").get(pk=call.run_id)
        title = f"Budget {budget.name}" if refused.reason == core.OVER else f"No price for {call.model}"
        wait, _ = Wait.objects.update_or_create(
            node_run_id=call.node_run_id,
            attempt=call.attempt,
            defaults={
                "run_id": call.run_id,
                "workflow_id": run.workflow_id,
                "node_id": call.node_id,
                "kind": WAIT_KIND,
                "title": title[:200],
                "key": f"budget:{budget.pk}",
                "proposed": {"budget": budget.name, "reason": refused.reason, "need": str(applies.worst)},
                "due_at": core.resets_at(budget.window, now),
                "closed_at": None,
                "outcome": "",
                "result": None,
            },
        )
        BudgetHold.objects.create(
            wait=wait,
            budget=budget,
            node_run_id=call.node_run_id,
            run_id=call.run_id,
            attempt=call.attempt,
            reason=refused.reason,
            need=applies.worst,
            subject=applies.subject,
            model=call.model[:200],
            provider=call.provider[:60],
        )
        RunEvent.objects.create(
            run_id=call.run_id,
            kind="node.waiting",
            node_id=call.node_id,
            attempt=call.attempt,
            at=now,
            data={
                "kind": WAIT_KIND,
                "reason": refused.reason,
                "budget": budget.name,
                "need": str(applies.worst),
                "policy": budget.policy,
                "due_at": iso(core.resets_at(budget.window, now)),
            },
        )
    return True


@dataclass(frozen=True)
class Open:
    """An open hold with what deciding on it needs."""

    hold: BudgetHold
    version_id: int
    priority: int
    still_held: bool  # its node still waits at the hold's attempt


def open_holds(now: datetime, limit: int = 1000) -> list[Open]:
    """The oldest `limit` open holds, highest effective priority first (the run's priority
    aged by the time held, as capacity.py offers held nodes: core/priorities.py), then oldest."""
    holds = list(
        BudgetHold.objects.filter(closed_at__isnull=True)
        .select_related("budget", "wait")
        .order_by("id")[:limit]
    )
    if not holds:
        return []
    nodes = {
        n["id"]: n
        for n in NodeRun.objects.filter(pk__in=[h.node_run_id for h in holds]).values(
            "id", "status", "attempt", "run__version_id", "run__priority"
        )
    }
    found = []
    for h in holds:
        node = nodes.get(h.node_run_id)
        if node is None:
            continue
        waiting = node["status"] == N.WAITING and node["attempt"] == h.attempt
        found.append(Open(h, node["run__version_id"], node["run__priority"], waiting))
    found.sort(key=lambda o: (-priorities.effective(o.priority, age(o.hold, now)), o.hold.pk))
    return found


def age(h: BudgetHold, now: datetime) -> float:
    return max(0.0, (now - h.created_at).total_seconds())


def offer_held(now: datetime | None = None) -> int:
    """Release the held attempts whose reason has cleared (see the module); return how many
    moved, gone holds closed included."""
    now = now or timezone.now()
    holds = open_holds(now)
    if not holds:
        return 0
    gone = [o.hold for o in holds if not o.still_held]
    if gone:
        close(gone, "gone", now)
    room: dict[tuple[int, str, str], Decimal] = {}
    going: list[Open] = []
    for item in (o for o in holds if o.still_held):
        if may_go(item.hold, room, now):
            going.append(item)
    return len(gone) + release(going, "released", now)


def may_go(h: BudgetHold, room: dict[tuple[int, str, str], Decimal], now: datetime) -> bool:
    """Whether a hold's reason has cleared; count what it will take of its window's room."""
    budget = h.budget
    if budget is None or h.allowed:
        return True
    if h.reason == core.NO_PRICE:
        return budget.unit != core.COST or ledger.price(h.provider, h.model) is not None
    period = core.period_of(budget.window, h.run_id, now)
    key = (budget.pk, period, h.subject)
    if key not in room:
        pending = pending_need(budget.pk, h.subject, h.run_id if budget.window == core.RUN else None, now)
        room[key] = ledger.left_in(budget, period, h.subject) - pending
    need = h.need or Decimal(0)
    if need > room[key]:
        return False
    room[key] -= need
    return True


def pending_need(budget_id: int, subject: str, run_id: int | None, now: datetime) -> Decimal:
    """What the attempts released for a window (a run's, for a per-run budget) will reserve
    and have not yet (PENDING_SQL)."""
    since = now - timedelta(seconds=PENDING_SECONDS)
    with connection.cursor() as cur:
        cur.execute(PENDING_SQL, {"budget": budget_id, "subject": subject, "run": run_id, "since": since})
        row = cur.fetchone()
    return Decimal(row[0]) if row else Decimal(0)


def release(items: list[Open], outcome: str, now: datetime) -> int:
    """Queue these held attempts again (same attempt, new jobs); close their holds and waits."""
    if not items:
        return 0
    with transaction.atomic():
        rows = [jobs.ready(o.hold.node_run_id, load_graph(o.version_id), node_id(o)) for o in items]
        packed = jobs.pack(rows, 1, direct=False)
        attempts = {o.hold.node_run_id: o.hold.attempt for o in items}
        params = {"attempts": [attempts[i] for job in packed for i in job.noderun_ids]}
        moved: set[int] = set()

        def claim(p: dict[str, Any]) -> list[transitions.InputRow]:
            found = transitions.release_held(p)
            moved.update(r.noderun_id for r in found)
            return found

        jobs.claim_packed(claim, packed, params)
        done = [o.hold for o in items if o.hold.node_run_id in moved]
        close(done, outcome, now)
        RunEvent.objects.bulk_create(
            RunEvent(
                run_id=h.run_id,
                kind="node.released",
                node_id=h.wait.node_id,
                attempt=h.attempt,
                at=now,
                data={"kind": WAIT_KIND, "budget": h.budget.name if h.budget else None, "how": outcome},
            )
            for h in done
        )
    return len(done)


def node_id(item: Open) -> str:
    return item.hold.wait.node_id


def close(holds: list[BudgetHold], outcome: str, now: datetime) -> None:
    ids = [h.pk for h in holds]
    BudgetHold.objects.filter(pk__in=ids, closed_at__isnull=True).update(closed_at=now, outcome=outcome)
    Wait.objects.filter(budget_holds__in=ids, closed_at__isnull=True).update(closed_at=now, outcome=outcome)


def allow_once(hold_id: int, actor: Any = None) -> BudgetHold:
    """Let a held call go over its budget, once (a person's decision under the `ask` policy)."""
    now = timezone.now()
    with transaction.atomic():
        h = (
            BudgetHold.objects.select_for_update(of=("self",))
            .select_related("budget", "wait")
            .filter(pk=hold_id)
            .first()
        )
        if h is None:
            raise NotFound(f"Budget hold {hold_id} does not exist.")
        if h.closed_at is not None:
            raise Conflict(f"Budget hold {hold_id} is already closed ({h.outcome}).")
        if h.reason == core.NO_PRICE:  # a call is never counted free, not even once
            raise Conflict(
                f"Budget hold {hold_id} waits for a price of {h.model!r}: set one on the LLM page."
            )
        run = Run.objects.values("version_id", "priority").get(pk=h.run_id)
        BudgetHold.objects.filter(pk=h.pk).update(allowed=True)
        h.allowed = True
        if not release([Open(h, run["version_id"], run["priority"], True)], "allowed", now):
            raise Conflict(f"Run {h.run_id}'s node {h.wait.node_id!r} no longer waits on this budget.")
        audit.record(actor, "budget.allow_once", h, run=h.run_id, node=h.wait.node_id)
    return h


def held_by(budget_id: int, limit: int = 100) -> list[BudgetHold]:
    """The open holds of one budget, oldest first, for its page."""
    return list(
        BudgetHold.objects.filter(budget_id=budget_id, closed_at__isnull=True)
        .select_related("wait", "run__workflow")
        .order_by("id")[:limit]
    )


def asking(limit: int = 100) -> list[BudgetHold]:
    """The open holds of budgets whose policy asks a person, oldest first (the inbox's)."""
    return list(
        BudgetHold.objects.filter(closed_at__isnull=True, budget__policy=core.ASK)
        .select_related("wait", "run__workflow", "budget")
        .order_by("id")[:limit]
    )


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None
