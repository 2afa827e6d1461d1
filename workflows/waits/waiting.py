"""Nodes that wait: entering a wait, events, deadlines, escalation (approvals.py: decisions, the inbox).

Each call owns its transaction; notices to the schedulers go out after commit, so a woken
node's successors start at once. PostgreSQL is the record: a waiting node is a NodeRun in
`waiting` plus its Wait row, nothing in Redis, and no process holds it; after kill -9 of
every process or a Redis flush it waits on, and the reconciler leaves it alone.

Deadlines (a timer's end, an approval's SLA, a timeout) are NodeRun.due_at of waiting nodes,
under a partial index: the schedulers' housekeeping (`fire_deadlines`, every 0.5 s) reads
only those due, so the work at rest does not grow with the number waiting, and fires each
with a conditional UPDATE (`status = 'waiting' AND due_at <= now()`): with several
schedulers, once. Escalation is likewise a conditional UPDATE (`escalated_at IS NULL`).

Events and waits on one key are serialised by a transaction-scoped advisory lock on the key:
an event posted while a node is entering its wait is either seen by the node (retained) or
wakes it (waiting), never neither.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from workflows.core import waits as core
from workflows.core.graph import APPROVAL, EVENT, TIMER
from workflows.core.states import NodeStatus as N
from workflows.runtime import bus, transitions
from workflows.runtime.transitions import Awake
from workflows.store import audit
from workflows.store.errors import Invalid
from workflows.store.graphs import load_graph
from workflows.store.models import NodeRun, PostedEvent, Run, RunEvent, Wait
from workflows.store.payloads import check_json_size, from_json
from workflows.store.statements import NODES

DEADLINE_BATCH = 500


# --------------------------------------------------------------------------- entering a wait


@dataclass
class Entered:
    wait: Wait
    plan: core.WaitPlan


def enter_waits(rows: list[Any], status: N, now: datetime | None = None) -> int:
    """Make ready wait nodes (jobs.Ready rows, still in `status`) wait; return how many moved.

    Called by the wait kinds' claim (runtime/kinds.py) in the scheduler.
    """
    if not rows:
        return 0
    now = now or timezone.now()
    ids = [row.noderun_id for row in rows]
    plans, configs = plan_waits(ids, now)
    ids = [i for i in ids if i in plans]
    due = [now - timedelta(seconds=1) if plans[i].error else plans[i].next_deadline for i in ids]
    with transaction.atomic():
        moved = transitions.enter_waits(status, ids, due)
        entered = record_waits(moved, plans, configs)
        woken = fail_unplanned(entered) + consume_retained(entered, now)
    if woken:
        transaction.on_commit(lambda: bus.notify(woken))
    return len(moved)


def plan_waits(
    ids: list[int], now: datetime
) -> tuple[dict[int, core.WaitPlan], dict[int, Mapping[str, Any]]]:
    """Compute each node's plan from its config, its run input and its predecessors' outputs."""
    claims = transitions.read_inputs(ids, [])
    graphs = {row.noderun_id: (load_graph(row.version_id), row) for row in claims if row.kind == "claim"}
    upstream = {p for graph, row in graphs.values() for p in graph.predecessors(row.node_id)}
    outputs: dict[int, dict[str, Any]] = {}
    if upstream:
        for row in transitions.read_inputs(ids, upstream):
            if row.kind == "output":
                outputs.setdefault(row.run_id, {})[row.node_id] = from_json(row.value)
    plans: dict[int, core.WaitPlan] = {}
    configs: dict[int, Mapping[str, Any]] = {}
    for noderun_id, (graph, row) in graphs.items():
        node = graph.nodes[row.node_id]
        run_input, done = from_json(row.value), outputs.get(row.run_id, {})
        output = core.expression_output(done, graph.predecessors(row.node_id))
        plans[noderun_id] = core.plan_wait(node.kind, node.config, run_input, output, now)
        configs[noderun_id] = node.config
    return plans, configs


def record_waits(
    moved: list[transitions.EnteredWait],
    plans: Mapping[int, core.WaitPlan],
    configs: Mapping[int, Mapping[str, Any]],
) -> list[Entered]:
    """Write the Wait rows of the nodes that moved, and their history events."""
    workflows = dict(Run.objects.filter(pk__in={m.run_id for m in moved}).values_list("id", "workflow_id"))
    entered = [
        Entered(
            new_wait(m, plans[m.noderun_id], configs[m.noderun_id], workflows[m.run_id]), plans[m.noderun_id]
        )
        for m in moved
    ]
    Wait.objects.bulk_create([e.wait for e in entered])
    events = []
    for (_, run_id, node_id, attempt, since), item in zip(moved, entered, strict=True):
        plan = item.plan
        data = {
            "kind": plan.kind,
            "key": plan.key,
            "due_at": iso(item.wait.due_at),
            "expires_at": iso(plan.expires_at),
        }
        events.append(
            RunEvent(
                run_id=run_id, kind="node.waiting", node_id=node_id, attempt=attempt, at=since, data=data
            )
        )
        if plan.kind == APPROVAL and not plan.error:
            events.append(history("approval.requested", item.wait, approval_summary(item.wait)))
    RunEvent.objects.bulk_create(events)
    return entered


def new_wait(
    moved: tuple[Any, ...], plan: core.WaitPlan, config: Mapping[str, Any], workflow_id: int
) -> Wait:
    noderun_id, run_id, node_id, attempt, _ = moved
    people = config.get("approvers") or {}
    return Wait(
        node_run_id=noderun_id,
        run_id=run_id,
        workflow_id=workflow_id,
        node_id=node_id,
        attempt=attempt,
        kind=plan.kind,
        title=str(config.get("title", ""))[:200],
        key=plan.key,
        first_only=bool(config.get("first_only", False)),
        proposed=plan.proposed,
        users=list(people.get("users", [])),
        groups=list(people.get("groups", [])),
        roles=list(people.get("roles", [])),
        open_to_operators=plan.kind == APPROVAL
        and not any(people.get(k) for k in ("users", "groups", "roles")),
        due_at=plan.sla_at or plan.expires_at,
        escalate_at=plan.escalate_at,
        expires_at=plan.expires_at,
    )


def fail_unplanned(entered: list[Entered]) -> list[int]:
    """Fail at once the waits whose data could not give what their config asks."""
    bad = [e for e in entered if e.plan.error]
    if not bad:
        return []
    rows = [Awake(e.wait.node_run_id, e.wait.attempt, N.FAILED, None, e.plan.error) for e in bad]
    changed = transitions.expire_waits(rows)
    close([e.wait for e in bad], "failed", None)
    return [row[1] for row in changed]


def consume_retained(entered: list[Entered], now: datetime) -> list[int]:
    """Wake new event waits at once with an event kept for their key, consuming it."""
    keyed = sorted(
        (e for e in entered if e.plan.kind == EVENT and not e.plan.error), key=lambda e: e.wait.key
    )
    woken: list[int] = []
    for item in keyed:
        lock_key(item.wait.key)
        posted = (
            PostedEvent.objects.select_for_update()
            .filter(key=item.wait.key, retained=True, expires_at__gt=now)
            .order_by("id")
            .first()
        )
        if posted is None:
            continue
        woken += wake([item.wait], posted)
        posted.retained = False
        posted.woke = [*posted.woke, item.wait.node_run_id]
        posted.save(update_fields=["retained", "woke"])
    return woken


# --------------------------------------------------------------------------- events


@dataclass(frozen=True)
class Posted:
    event_id: int
    key: str
    woken_runs: list[int]
    retained: bool


def post_event(key: Any, payload: Any, source: str = "", actor: Any = None) -> Posted:
    """Post an event: wake every node waiting on `key` (only the oldest of the `first_only`
    ones); when none waits, keep it for the retention time for the first that will."""
    key = check_key(key)
    check_json_size(payload, settings.SWITCHYARD["MAX_OUTPUT_BYTES"], "payload")
    now = timezone.now()
    retention = timedelta(seconds=settings.SWITCHYARD["EVENT_RETENTION_SECONDS"])
    with transaction.atomic():
        lock_key(key)
        waiting = list(
            Wait.objects.filter(
                key=key, kind=EVENT, closed_at__isnull=True, node_run__status=N.WAITING
            ).order_by("id")
        )
        first = [w for w in waiting if w.first_only][:1]
        targets = [w for w in waiting if not w.first_only] + first
        posted = PostedEvent.objects.create(
            key=key, payload=payload, source=source[:200], expires_at=now + retention, retained=not targets
        )
        woken = wake(targets, posted)
        if targets:
            posted.woke = [w.node_run_id for w in targets]
            posted.retained = not woken
            posted.save(update_fields=["woke", "retained"])
        audit.record(actor, "event.post", posted, key=key, source=source, woke=len(woken))
    if woken:
        transaction.on_commit(lambda: bus.notify(woken))
    return Posted(posted.pk, key, sorted(set(woken)), posted.retained)


def check_key(key: Any) -> str:
    if isinstance(key, bool) or not isinstance(key, (str, int, float)):
        raise Invalid("key must be a string or a number.")
    text = core.event_key(key)
    if not text or len(text) > 500:
        raise Invalid("key must be 1 to 500 characters long.")
    return text


def wake(waits: list[Wait], posted: PostedEvent) -> list[int]:
    """Store the event's payload as these waits' outputs; return the runs of those woken."""
    if not waits:
        return []
    output = json.dumps(posted.payload)
    changed = transitions.wake_waits([Awake(w.node_run_id, w.attempt, N.SUCCEEDED, output) for w in waits])
    ended = {row[0]: row[6] for row in changed}  # each node's end, by the statement's clock
    woken = [w for w in waits if w.node_run_id in ended]
    close(woken, "event", posted.payload)
    data = {"event": posted.pk, "key": posted.key, "source": posted.source}
    RunEvent.objects.bulk_create(
        RunEvent(**history_fields("node.woken", w, data) | {"at": ended[w.node_run_id]}) for w in woken
    )
    return [w.run_id for w in woken]


def lock_key(key: str) -> None:
    with connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 7714))", [key])


# --------------------------------------------------------------------------- deadlines

DUE_WAITS_SQL = f"""
SELECT n.id FROM {NODES} n
WHERE n.status = '{N.WAITING}' AND n.due_at <= %(now)s
ORDER BY n.due_at LIMIT %(limit)s
"""


# Wait deadlines (SLAs, timeouts, timers) fire within this much of their time. Probed with
# the 0.1 s housekeeping, the probe was a quarter more statements on the scheduler's loop and
# cost 12 % of node throughput at N=2000 (make bench, four alternating pairs).
DEADLINE_SECONDS = 0.5


def fire_deadlines(now: datetime | None = None, limit: int = DEADLINE_BATCH) -> int:
    """Escalate approvals past their SLA and expire waits past their end; return how many.

    The schedulers' housekeeping calls this: one probe of an index that holds only waiting
    nodes, however many there are.
    """
    now = now or timezone.now()
    with connection.cursor() as cur:
        cur.execute(DUE_WAITS_SQL, {"now": now, "limit": limit})
        ids = [row[0] for row in cur.fetchall()]
    if not ids:
        return 0
    due = list(Wait.objects.filter(node_run_id__in=ids, closed_at__isnull=True).select_related("node_run"))
    due = [w for w in due if w.attempt == w.node_run.attempt]
    escalating = [w for w in due if w.escalate_at and not w.escalated_at and w.escalate_at <= now]
    expiring = [w for w in due if w not in escalating and w.expires_at and w.expires_at <= now]
    return sum(escalate(w, now) for w in escalating) + expire(expiring, now)


def escalate(wait: Wait, now: datetime) -> int:
    """Give an approval past its SLA to its escalation target, once (a conditional UPDATE)."""
    config = node_config(wait)
    target = config.get("escalate_to") or {}
    reassign = config.get("escalation") == core.REASSIGN
    merged = {
        k: sorted(set(target.get(k, [])) | (set() if reassign else set(getattr(wait, k))))
        for k in ("users", "groups", "roles")
    }
    with transaction.atomic():
        if not Wait.objects.filter(pk=wait.pk, escalated_at__isnull=True, closed_at__isnull=True).update(
            escalated_at=now, open_to_operators=False if reassign else wait.open_to_operators, **merged
        ):
            return 0
        NodeRun.objects.filter(pk=wait.node_run_id, attempt=wait.attempt, status=N.WAITING).update(
            due_at=wait.expires_at
        )
        data = {
            "to": target,
            "how": "reassigned" if reassign else "added",
            "sla": iso(wait.escalate_at),
            **merged,
        }
        RunEvent.objects.create(**history_fields("approval.escalated", wait, data))
        audit.record(None, "approval.escalate", wait, run=wait.run_id, node=wait.node_id, **data)
    return 1


def expire(waits: list[Wait], now: datetime) -> int:
    """Apply each expired wait's policy: a timer ends, a timeout fails, approves or rejects."""
    if not waits:
        return 0
    rows, outputs = [], {}
    for wait in waits:
        row, output = expiry_of(wait, node_config(wait), now)
        rows.append(row)
        outputs[wait.pk] = output
    with transaction.atomic():
        changed = {row.noderun_id: row.finished_at for row in transitions.expire_waits(rows)}
        done = [w for w in waits if w.node_run_id in changed]
        for wait in done:
            close([wait], "expired", outputs[wait.pk])
            kind = "approval.decided" if wait.kind == APPROVAL and outputs[wait.pk] else "node.expired"
            fields = history_fields(kind, wait, outputs[wait.pk] or {"timed_out": True})
            RunEvent.objects.create(**fields | {"at": changed[wait.node_run_id]})
    run_ids = [w.run_id for w in done]
    if run_ids:
        transaction.on_commit(lambda: bus.notify(run_ids))
    return len(done)


def expiry_of(wait: Wait, config: Mapping[str, Any], now: datetime) -> tuple[Awake, Any]:
    outcome = core.timeout_outcome(wait.kind, config)
    at = iso(wait.expires_at)
    if outcome == core.FAIL:
        what = "approval" if wait.kind == APPROVAL else "event wait"
        error = f"The {what} {wait.node_id} timed out at {at} with nobody deciding; on_timeout is fail."
        if wait.kind == EVENT:
            error = f"No event on key {wait.key!r} reached {wait.node_id} before {at}; on_timeout is fail."
        return Awake(wait.node_run_id, wait.attempt, N.FAILED, None, error), None
    if wait.kind == TIMER:
        output: Any = {"waited_until": at}
    elif wait.kind == EVENT:
        output = None
    else:
        output = {
            "decision": core.APPROVED if outcome == core.APPROVE else core.REJECTED,
            "approved": outcome == core.APPROVE,
            "by": "system",
            "at": now.isoformat(),
            "fields": {},
            "comment": f"Timed out at {at}; on_timeout is {outcome}.",
            "data": wait.proposed,
            "edited": {},
            "via": "timeout",
        }
    return Awake(wait.node_run_id, wait.attempt, N.SUCCEEDED, json.dumps(output)), output


def approval_summary(wait: Wait) -> dict[str, Any]:
    return {
        "approval": wait.pk,
        "title": wait.title,
        "due_at": iso(wait.due_at),
        "expires_at": iso(wait.expires_at),
        "users": wait.users,
        "groups": wait.groups,
        "roles": wait.roles,
    }


# --------------------------------------------------------------------------- helpers


def node_config(wait: Wait) -> Mapping[str, Any]:
    return load_graph(wait.run.version_id).nodes[wait.node_id].config


def close(waits: Iterable[Wait], outcome: str, result: Any) -> None:
    now = timezone.now()
    ids = [w.pk for w in waits]
    Wait.objects.filter(pk__in=ids, closed_at__isnull=True).update(
        closed_at=now, outcome=outcome, result=result
    )
    for wait in waits:
        wait.closed_at, wait.outcome, wait.result = now, outcome, result


def history_fields(kind: str, wait: Wait, data: Any) -> dict[str, Any]:
    return {
        "run_id": wait.run_id,
        "kind": kind,
        "node_id": wait.node_id,
        "attempt": wait.attempt,
        "at": timezone.now(),
        "data": {"approval": wait.pk, **data} if wait.kind == APPROVAL else data,
    }


def history(kind: str, wait: Wait, data: Any) -> RunEvent:
    return RunEvent(**history_fields(kind, wait, data))


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None
