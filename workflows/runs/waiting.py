"""Runs that wait, and what for: a state shown and searched, derived, never stored.

A run's status is written by runtime/transitions only, by the moves of core/states.py, and a
run whose node waits stays `running` there: the engine, the reconciler and the partial
indexes read it so, and a new stored status would be a new move for every writer. What
people see is derived here, in one place. A run is shown, counted and found as `waiting` when

- its status is `waiting`: it was started while its workflow was paused, and waits for a
  resume; or
- it is `running` and a node of it waits on the world outside: an approval, an event or a
  timer (a Wait row still open), or a child run not ended yet (a ChildRun link not settled:
  a `workflow.run` node's, or an agent's workflow tool's). Other nodes may work meanwhile.

A map node also sits in `waiting` while its items run on workers: such a run is working and
is shown as running. `Run.waiting_nodes` (kept by the wait statements) bounds the probe: only
runs with a waiting node are looked at, by the Wait and ChildRun indexes on their run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Exists, OuterRef, Q, QuerySet

from workflows.core.states import RunStatus
from workflows.store.models import ChildRun, Run, Wait
from workflows.store.statements import CHILD_RUNS, RUNS, WAITS

WAITING = RunStatus.WAITING
RUNNING = RunStatus.RUNNING


def waits_outside() -> Q:
    """The runs (running) with a node that waits on a person, an event, a timer or a child run."""
    open_wait = Exists(Wait.objects.filter(run=OuterRef("pk"), closed_at__isnull=True))
    open_child = Exists(ChildRun.objects.filter(parent_run=OuterRef("pk"), settled_at__isnull=True))
    return Q(status=RUNNING, waiting_nodes__gt=0) & (Q(open_wait) | Q(open_child))


# `waits_outside` for raw statements over the runs table aliased `r`.
WAITS_OUTSIDE_SQL = f"""(r.status = '{RUNNING}' AND r.waiting_nodes > 0 AND (
    EXISTS (SELECT FROM {WAITS} w WHERE w.run_id = r.id AND w.closed_at IS NULL)
    OR EXISTS (SELECT FROM {CHILD_RUNS} c WHERE c.parent_run_id = r.id AND c.settled_at IS NULL)))"""

# A run's status as shown: `waiting` for the runs above, else its stored status.
SHOWN_STATUS_SQL = f"CASE WHEN {WAITS_OUTSIDE_SQL} THEN '{WAITING}' ELSE r.status END"

# How many runs of each workflow are in flight, by their shown status (the overview's counts).
# The editor's test runs (Run.is_test) are not counted: the overview counts production runs.
IN_FLIGHT_BY_SHOWN_STATUS_SQL = f"""
SELECT r.workflow_id, {SHOWN_STATUS_SQL}, count(*) FROM {RUNS} r
WHERE r.status IN ('{RUNNING}', '{WAITING}') AND NOT r.is_test GROUP BY 1, 2
"""


def with_shown_status(runs: QuerySet[Run], status: str) -> QuerySet[Run]:
    """The runs whose shown status is `status` (`waiting` and `running` differ from the stored one)."""
    if status == WAITING:
        return runs.filter(Q(status=WAITING) | waits_outside())
    if status == RUNNING:
        return runs.filter(status=RUNNING).exclude(waits_outside())
    return runs.filter(status=status)


@dataclass(frozen=True)
class WaitingFor:
    """One thing a run waits for: what (a sentence's object), at which node, and a child run's id."""

    what: str
    node_id: str = ""
    child_run_id: int | None = None


PAUSED = WaitingFor("its workflow to be resumed (started while paused)")
KINDS = {
    "human.approval": "a decision",
    "wait.event": "an event",
    "wait.timer": "a timer",
    "budget": "a spend budget",
    "provider": "an LLM provider to be available (its breaker or rate)",
}


def waiting_for(runs: Iterable[Run]) -> dict[int, list[WaitingFor]]:
    """What each waiting run among `runs` waits for; runs that do not wait are left out."""
    runs = list(runs)
    found: dict[int, list[WaitingFor]] = {r.pk: [PAUSED] for r in runs if r.status == WAITING}
    probed = [r.pk for r in runs if r.status == RUNNING and r.waiting_nodes > 0]
    if not probed:
        return found
    waits = Wait.objects.filter(run_id__in=probed, closed_at__isnull=True).order_by("id")
    for wait in waits.only("run_id", "node_id", "kind", "key"):
        found.setdefault(wait.run_id, []).append(WaitingFor(describe_wait(wait), wait.node_id))
    links = ChildRun.objects.filter(parent_run_id__in=probed, settled_at__isnull=True).order_by("id")
    for link in links.select_related("child__workflow").only("parent_run_id", "node_id", "child"):
        what = f"child run #{link.child_id} ({link.child.workflow.slug})"
        found.setdefault(link.parent_run_id, []).append(WaitingFor(what, link.node_id, link.child_id))
    return found


def describe_wait(wait: Wait) -> str:
    """`an event (order:A-7)`, `a decision`, `a timer`."""
    what = KINDS.get(wait.kind, wait.kind)
    return f"{what} ({wait.key})" if wait.kind == "wait.event" and wait.key else what
