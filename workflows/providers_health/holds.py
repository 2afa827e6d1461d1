"""Attempts held behind an open breaker or a provider's rate, and their release.

A held attempt is a waiting node (runtime/transitions `hold_attempt`: running -> waiting,
no attempt spent, no worker held) with a Wait row of kind "provider" that says what it waits
for: `key` "breaker:<provider>/<model>" (the first of the node's route) or
"rate:<provider>", `proposed` every breaker of its route ({"breakers": [...]}: any one of
them closing frees it), `due_at` when the reason should clear. It is all in PostgreSQL: a
Redis flush or a kill -9 of every process leaves the node held, and the duty releases it.

`offer_held` (a scheduler duty, every OFFER_SECONDS, and the call that closes a breaker)
releases, highest effective priority first (the run's, aged by the time held, as capacity.py
and the budgets offer theirs), then oldest: every attempt behind a breaker of its route that
is closed; one behind a breaker whose open period ended (it will be the probe; the others
wait for its answer); behind a rate, as many as the window has room for once the time it
named has passed. Releasing queues the same attempt again in a new job; the worker's call
asks the gate again, which is the only authority: one released too early is held again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from workflows.core import priorities
from workflows.core.states import NodeStatus as N
from workflows.runtime import jobs, transitions
from workflows.runtime.admission import Call
from workflows.store.graphs import load_graph
from workflows.store.models import NodeRun, Run, RunEvent, Wait

from . import breaker, rates
from .policy import policy_of

OFFER_SECONDS = 0.5
WAIT_KIND = "provider"
BREAKER, RATE = "breaker", "rate"


def route_of(call: Call) -> list[tuple[str, str]]:
    return list(call.route) or [(call.provider, call.model)]


def hold(call: Call, why: str, until: datetime | None, now: datetime) -> bool:
    """Hold the call's attempt (`why`: BREAKER, every breaker of its route open; RATE: its
    provider's rate); return whether it was still running at that attempt."""
    route = route_of(call)
    if why == BREAKER:
        names = [breaker.name(p, m) for p, m in route]
        key, title = f"{BREAKER}:{names[0]}", f"provider {names[0]} unavailable"
        reason = f"provider {' / '.join(names)} unavailable until {stamp(until)}"
    else:
        names = []
        key, title = f"{RATE}:{call.provider}", f"provider {call.provider} rate limit"
        reason = f"provider {call.provider} at its request/token rate until {stamp(until)}"
    with transaction.atomic():
        if not transitions.hold_attempt(call.node_run_id, call.attempt):
            return False
        workflow_id = Run.objects.values_list("workflow_id", flat=True).get(pk=call.run_id)
        Wait.objects.update_or_create(
            node_run_id=call.node_run_id,
            attempt=call.attempt,
            defaults={
                "run_id": call.run_id,
                "workflow_id": workflow_id,
                "node_id": call.node_id,
                "kind": WAIT_KIND,
                "title": title[:200],
                "key": key[:500],
                "proposed": {"breakers": names, "reason": reason},
                "due_at": until,
                "closed_at": None,
                "outcome": "",
                "result": None,
            },
        )
        RunEvent.objects.create(
            run_id=call.run_id,
            kind="node.waiting",
            node_id=call.node_id,
            attempt=call.attempt,
            at=now,
            data={"kind": WAIT_KIND, "reason": reason, "until": stamp(until)},
        )
    return True


def stamp(when: datetime | None) -> str:
    return when.isoformat(timespec="seconds") if when else "its probe answers"


@dataclass(frozen=True)
class Held:
    wait: Wait
    version_id: int
    priority: int
    still_held: bool  # its node still waits at the wait's attempt


def open_holds(now: datetime, limit: int = 2000) -> list[Held]:
    """The oldest `limit` provider holds, highest effective priority first, then oldest."""
    waits = list(Wait.objects.filter(kind=WAIT_KIND, closed_at__isnull=True).order_by("id")[:limit])
    if not waits:
        return []
    nodes = {
        n["id"]: n
        for n in NodeRun.objects.filter(pk__in=[w.node_run_id for w in waits]).values(
            "id", "status", "attempt", "run__version_id", "run__priority"
        )
    }
    found = []
    for w in waits:
        node = nodes.get(w.node_run_id)
        if node is None:
            continue
        waiting = node["status"] == N.WAITING and node["attempt"] == w.attempt
        found.append(Held(w, node["run__version_id"], node["run__priority"], waiting))
    found.sort(key=lambda h: (-priorities.effective(h.priority, age(h.wait, now)), h.wait.pk))
    return found


def age(wait: Wait, now: datetime) -> float:
    return max(0.0, (now - wait.created_at).total_seconds())


def offer_held(now: datetime | None = None) -> int:
    """Release the held attempts whose reason has cleared (see the module); return how many
    moved, gone holds closed included."""
    now = now or timezone.now()
    held = open_holds(now)
    if not held:
        return 0
    gone = [h.wait for h in held if not h.still_held]
    close(gone, "gone", now)
    states: dict[str, breaker.State] = {}
    room: dict[str, int] = {}
    probes: set[str] = set()
    going = [h for h in held if h.still_held and may_go(h.wait, states, room, probes, now)]
    return len(gone) + release(going, now)


def may_go(
    wait: Wait, states: dict[str, breaker.State], room: dict[str, int], probes: set[str], now: datetime
) -> bool:
    """Whether a hold's reason has cleared; count the probe or the room its release takes."""
    kind, _, what = wait.key.partition(":")
    if kind == RATE:
        return rate_room(what, wait, room, now)
    names = (wait.proposed or {}).get("breakers") or [what]
    for name in names:
        if name not in states:
            provider, _, model = name.partition("/")
            states[name] = breaker.read(provider, model)
        state = states[name]
        if state.state == breaker.CLOSED:
            return True
        # An open period that ended, or a probe whose lease ran out (its worker died, or it
        # was held again): one attempt goes to be the probe; the rest wait for its answer.
        ended = state.until is None or state.until <= now
        if state.state in (breaker.OPEN, breaker.HALF_OPEN) and ended and name not in probes:
            probes.add(name)
            return True
    return False


def rate_room(provider: str, wait: Wait, room: dict[str, int], now: datetime) -> bool:
    if wait.due_at is not None and wait.due_at > now:
        return False
    if provider not in room:
        policy = policy_of(provider)
        limit = policy.per_window(policy.rpm)
        room[provider] = limit - rates.in_window(provider)[0] if limit else 10**6
    if room[provider] <= 0:
        return False
    room[provider] -= 1
    return True


def release(items: list[Held], now: datetime) -> int:
    """Queue these held attempts again (same attempt, new jobs, in the order given); close their waits."""
    if not items:
        return 0
    with transaction.atomic():
        rows = [jobs.ready(h.wait.node_run_id, load_graph(h.version_id), h.wait.node_id) for h in items]
        packed = jobs.pack(rows, 1, direct=False)
        attempts = {h.wait.node_run_id: h.wait.attempt for h in items}
        params = {"attempts": [attempts[i] for job in packed for i in job.noderun_ids]}
        moved: set[int] = set()

        def claim(p: dict[str, Any]) -> list[transitions.InputRow]:
            found = transitions.release_held(p)
            moved.update(r.noderun_id for r in found)
            return found

        jobs.claim_packed(claim, packed, params)
        done = [h.wait for h in items if h.wait.node_run_id in moved]
        close(done, "released", now)
        RunEvent.objects.bulk_create(
            RunEvent(
                run_id=w.run_id,
                kind="node.released",
                node_id=w.node_id,
                attempt=w.attempt,
                at=now,
                data={"kind": WAIT_KIND, "key": w.key, "how": "released"},
            )
            for w in done
        )
    return len(done)


def close(waits: list[Wait], outcome: str, now: datetime) -> None:
    if waits:
        Wait.objects.filter(pk__in=[w.pk for w in waits], closed_at__isnull=True).update(
            closed_at=now, outcome=outcome
        )


def held_behind(name: str, limit: int = 100) -> list[Wait]:
    """The open holds that wait on one breaker ("provider/model") or rate ("rate:provider")."""
    found = Wait.objects.filter(kind=WAIT_KIND, closed_at__isnull=True)
    found = (
        found.filter(key=name)
        if name.startswith(f"{RATE}:")
        else found.filter(proposed__breakers__contains=[name])
    )
    return list(found.select_related("run__workflow").order_by("id")[:limit])
