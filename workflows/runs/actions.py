"""Runs and what people do to them: start, pause, cancel, replay, discard.

These calls own their transactions; jobs and notices to the schedulers go out only after
commit. How a run advances once started is `advancing.py`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import Any

import redis
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from workflows.budgets import manage as budgets
from workflows.core import engine, priorities
from workflows.core.definition import Issue, canonical_json, check_run_input
from workflows.core.states import NodeStatus, RunStatus
from workflows.runs import startkeys
from workflows.runtime import bus, compensations as sagas, jobs, parents as childlinks, transitions
from workflows.store import audit
from workflows.store.errors import Conflict, Invalid, NotFound
from workflows.store.graphs import load_graph
from workflows.store.history import event, record_events
from workflows.store.models import (
    ChildRun,
    DeadLetter,
    NodeRun,
    Run,
    RunEvent,
    Wait,
    Workflow,
    WorkflowVersion,
)
from workflows.store.payloads import check_json_size

log = logging.getLogger(__name__)


def check_input(value: Any) -> None:
    """Refuse a run input (or a replay's edited input) that is not a JSON object within the limit."""
    if not isinstance(value, dict):
        raise Invalid("input must be a JSON object.")
    check_json_size(value, settings.SWITCHYARD["MAX_INPUT_BYTES"], "input")


def check_input_schema(version_id: int, run_input: dict[str, Any]) -> None:
    """Refuse a run input that breaks the version's ``input_schema``, naming each field."""
    issues = check_run_input(load_graph(version_id).input_schema, run_input)
    if issues:
        fields = ", ".join(issue.path for issue in issues)
        raise Invalid(
            f"The input does not match this workflow's input schema ({fields}); see errors.", issues
        )


def start_run(
    workflow: Workflow,
    run_input: Any,
    idempotency_key: str | None = None,
    version: WorkflowVersion | None = None,
    priority: int | None = None,
    as_read: bool = False,
    api_key_id: int | None = None,
) -> tuple[Run, bool]:
    """Create a run pinned to the active version (or to `version`, published); return (run, created).

    With an idempotency key, the same key and input return the run made the first time;
    the same key with another input is refused. Without a priority, the run takes the
    workflow's default (core/priorities.py). With `as_read`, `workflow` may come from a
    cache: if its active version or default priority changed since, StaleWorkflow is raised
    and nothing is written (the check is part of the INSERT: no extra round trip).
    """
    check_input(run_input)
    budgets.check_start(workflow, run_input, api_key_id)
    api_key_id = budgets.key_to_record(api_key_id)
    priority = workflow.default_priority if priority is None else priority
    if (problem := priorities.check_priority(priority)) is not None:
        raise Invalid(problem)
    version_id = version.pk if version is not None else workflow.active_version_id
    if version_id is None:
        raise Conflict(f"Workflow {workflow.slug!r} has no active version: publish one first.")
    if version is not None and not version.is_published:
        raise Conflict(f"Version {version.number} is a draft; only published versions can run.")
    try:
        check_input_schema(version_id, run_input)
    except WorkflowVersion.DoesNotExist:  # a workflow read from a cache, deleted since
        raise StaleWorkflow(
            f"Workflow {workflow.slug!r} was deleted while the run was being started."
        ) from None
    except Invalid:
        # A cached workflow may name a version published over since, whose schema is not
        # the one that now applies: refuse only against the active one (a read on this path only).
        if as_read and version is None and not is_still_active(workflow, version_id):
            raise StaleWorkflow(
                f"Workflow {workflow.slug!r} changed while the run was being started."
            ) from None
        raise
    request_hash = hashlib.sha256(canonical_json(run_input).encode()).hexdigest()
    expect = (version_id, workflow.default_priority) if as_read and version is None else None
    if startkeys.start_key_of(load_graph(version_id)) is not None:
        return start_keyed(
            workflow, version_id, run_input, idempotency_key, request_hash, priority, api_key_id
        )
    alone = not transaction.get_connection().in_atomic_block  # no caller's changes ride on this commit
    with transaction.atomic() if api_key_id else nullcontext():  # the key is recorded with the run
        run = create_run(
            workflow,
            version_id,
            run_input,
            idempotency_key or None,
            request_hash,
            priority,
            expect,
            early=alone,
        )
        if run is not None:
            budgets.remember_key([run.pk], api_key_id)
    if run is not None:
        return run, True
    # The key was taken (first, or by a concurrent request): answer with that run.
    return find_idempotent_run(workflow, idempotency_key or "", request_hash), False


def start_keyed(
    workflow: Workflow,
    version_id: int,
    run_input: dict[str, Any],
    idempotency_key: str | None,
    request_hash: str,
    priority: int,
    api_key_id: int | None,
) -> tuple[Run, bool]:
    """Start a run of a workflow that declares debounce or singleton (runs/startkeys.py).

    A start repeated with its idempotency key answers its run before any key is looked at:
    a client retrying its own singleton start is not refused because of itself.
    """
    if idempotency_key and Run.objects.filter(workflow=workflow, idempotency_key=idempotency_key).exists():
        return find_idempotent_run(workflow, idempotency_key, request_hash), False
    with transaction.atomic():
        keyed = startkeys.plan(workflow.pk, load_graph(version_id), run_input, timezone.now())
        run = create_run(
            workflow, version_id, run_input, idempotency_key or None, request_hash, priority, keyed=keyed
        )
        if run is None:
            return find_idempotent_run(workflow, idempotency_key or "", request_hash), False
        budgets.remember_key([run.pk], api_key_id)
        for earlier in keyed.replaces:
            cancel_locked(locked_run(earlier), f"debounced: replaced by run {run.pk}", None)
    return run, True


def is_still_active(workflow: Workflow, version_id: int) -> bool:
    return Workflow.objects.filter(pk=workflow.pk, active_version_id=version_id).exists()


def find_idempotent_run(workflow: Workflow, key: str, request_hash: str) -> Run:
    run = Run.objects.get(workflow=workflow, idempotency_key=key)
    if run.request_hash != request_hash:
        raise Conflict(
            f"Idempotency-Key {key!r} was already used for run {run.pk} with a different input; "
            "use a new key for a new run."
        )
    return run


class StaleWorkflow(Conflict):
    """The workflow as the caller read it (active version, default priority) is no longer so."""


class StartPacing:
    """Decide, per start, who enqueues a new run's roots (ready by definition).

    A start that comes alone enqueues them itself, in a direct job written with the run: no
    scheduler's turn stands between the start and the first node (about 1 ms of an idle
    run's 10). A start that comes in a burst (the previous start of this process was under
    START_BURST_GAP_SECONDS ago) leaves them pending and notifies the schedulers, which
    claim the roots of every run that started meanwhile in one statement and pack them
    into few jobs: per run, a job of its own costs more than the wait.
    """

    def __init__(self) -> None:
        self.last = -float("inf")

    def direct(self) -> bool:
        now = time.monotonic()
        alone = now - self.last >= settings.SWITCHYARD["START_BURST_GAP_SECONDS"]
        self.last = now
        return alone


pacing = StartPacing()


def create_run(
    workflow: Workflow,
    version_id: int,
    run_input: dict[str, Any],
    key: str | None,
    request_hash: str,
    priority: int = priorities.DEFAULT,
    expect: tuple[int, int] | None = None,
    keyed: startkeys.KeyedStart | None = None,
    early: bool = False,
) -> Run | None:
    """Write the run, its node rows and its first event in one statement (the start hot path).

    Return None, writing nothing, when the idempotency key is already taken in this workflow.
    With `expect` (active version id, default priority), raise StaleWorkflow, writing
    nothing, when the workflow no longer has them (the caller read it from a cache).

    With `early` (the start is a transaction of its own) and roots to enqueue, the roots go
    out before the run is on disk: the commit does not wait for its flush; after it, the
    roots are enqueued, and then a synchronous commit (lifecycle.flush_commits) waits for it.
    So the first node runs while the start's flush is under way (an idle run waited for it:
    one of four flushes in a row), and the start still returns only once its run is
    durable. If PostgreSQL crashes in between, the start raises and no run exists, though a
    root may have run for it: as an attempt retried after a lost result (at least once).
    A root's own result is never durable without its run: the WAL is flushed in order.
    """
    graph = load_graph(version_id)
    roots = jobs.pack_roots(graph) if pacing.direct() and not (keyed and keyed.hold) else []
    early = early and bool(roots)
    job_of = {node_id: job.job_id for job in roots for node_id in job.node_ids}
    params = {
        "workflow": workflow.pk,
        "version": version_id,
        "input": json.dumps(run_input),
        "key": key,
        "hash": request_hash,
        "priority": priority,
        "nodes": list(graph.order),
        "queues": [graph.nodes[n].queue for n in graph.order],
        "job_ids": [job_of.get(n, "") for n in graph.order],
        "expect_version": expect[0] if expect else None,
        "expect_priority": expect[1] if expect else None,
        "hold": keyed.hold if keyed else False,
        "start_key": keyed.key if keyed else None,
        "start_due": keyed.due_at if keyed else None,
        "relaxed": early,
    }
    try:
        row = transitions.create_run(params)
    except transitions.WorkflowChanged:
        raise StaleWorkflow(
            f"Workflow {workflow.slug!r} changed (version or default priority) while the run was being "
            "started; nothing was started: send the request again."
        ) from None
    if row is None:
        return None
    run_id, status, created_at, ids = row
    if status == RunStatus.RUNNING and roots:
        transaction.on_commit(lambda: jobs.enqueue_roots(roots, ids, run_id, version_id, run_input, priority))
    elif status == RunStatus.RUNNING:
        # The notice carries the new run's state, so the scheduler need not read it back.
        rows = [
            transitions.NodeRow(ids[n], run_id, n, NodeStatus.PENDING, 0, version_id, 0) for n in graph.order
        ]
        notice = rows if len(rows) <= bus.ROWS_AT_MOST else []
        transaction.on_commit(lambda: notify_committed([run_id], notice))
    if early:  # after the roots' job: on_commit runs its callbacks in order
        transaction.on_commit(transitions.flush_commits)
    run = Run(
        id=run_id,
        workflow=workflow,
        version_id=version_id,
        status=status,
        input=run_input,
        idempotency_key=key,
        request_hash=request_hash,
        priority=priority,
        created_at=created_at,
    )
    run._state.adding, run._state.db = False, "default"
    return run


def notify_committed(run_ids: list[int], rows: Sequence[Any] = ()) -> None:
    """Send the notice of a committed change; if Redis is away, leave it to the reconciler.

    The change is in PostgreSQL already, so raising here would answer 5xx for a run that
    exists (a client retrying without an idempotency key started it twice). The reconciler
    re-drives runs whose pending nodes nobody was told about, as for a lone start's jobs.
    """
    try:
        bus.notify(run_ids, rows)
    except redis.RedisError:
        log.warning(
            "runs %s: notice not sent, Redis unavailable; the reconciler will", run_ids, exc_info=True
        )


# --------------------------------------------------------------------------- starts in bulk

MAX_BATCH = 1000  # runs per start_runs call: one statement of at most this many rows
NOTICE_RUNS = 100  # runs named per notice, so that several schedulers share a batch's roots


@dataclass(frozen=True)
class StartItem:
    """One run of a batch: its input, and optionally its idempotency key and priority."""

    input: Any
    idempotency_key: str | None = None
    priority: int | None = None


def start_runs(
    workflow: Workflow,
    items: Sequence[StartItem],
    version: WorkflowVersion | None = None,
    api_key_id: int | None = None,
) -> list[tuple[Run, bool]]:
    """Start many runs in one transaction; return (run, created) per item, in item order.

    Every item is checked before anything is written, and one bad item refuses the whole
    batch (Invalid, 422) with an issue per bad field, its path naming the item
    (`items[3].input.count`): a caller fixes them all and sends the batch again, and never
    has to work out which half was started. Idempotency is per item, as for `start_run`:
    a key already used with the same input answers its run (created False), with another
    input refuses the batch (Conflict, 409, naming each such item). Two items of one batch
    with the same key and input get the same run; with another input they are refused.
    The runs, their node rows and their first events are one INSERT statement; the
    schedulers are told after commit and claim the roots of many runs per statement.
    """
    if len(items) > MAX_BATCH:
        raise Invalid(f"items: {len(items)} runs in one batch; the limit is {MAX_BATCH}.")
    version_id = start_version_id(workflow, version)
    graph = load_graph(version_id)
    if startkeys.start_key_of(graph) is not None:
        return [start_item(workflow, item, version, api_key_id) for item in items]
    budgets.check_starts(workflow, [item.input for item in items], api_key_id)
    api_key_id = budgets.key_to_record(api_key_id)
    hashes, firsts, issues = check_items(workflow, graph.input_schema, items)
    if issues:
        raise Invalid(f"{len({i.path.split('.')[0] for i in issues})} items are invalid; see errors.", issues)
    fresh = sorted(set(firsts.values()))
    params = {
        "workflow": workflow.pk,
        "version": version_id,
        "ords": fresh,
        "inputs": [json.dumps(items[i].input) for i in fresh],
        "keys": [items[i].idempotency_key or None for i in fresh],
        "hashes": [hashes[i] for i in fresh],
        "priorities": [item_priority(workflow, items[i]) for i in fresh],
        "nodes": list(graph.order),
        "queues": [graph.nodes[n].queue for n in graph.order],
    }
    with transaction.atomic():
        written = {row.ord: row[1:] for row in transitions.create_runs(params)}
        budgets.remember_key([run_id for run_id, _, _ in written.values()], api_key_id)
        existing = existing_runs(workflow, items, [i for i in fresh if i not in written], hashes)
        running = [run_id for run_id, status, _ in written.values() if status == RunStatus.RUNNING]
        transaction.on_commit(lambda: notify_in_chunks(running))
    pinned = version or workflow.active_version
    made = {i: new_run(workflow, pinned, items[i], hashes[i], *written[i]) for i in written}
    made |= existing
    return [(made[firsts[i]], firsts[i] == i and firsts[i] in written) for i in range(len(items))]


def start_item(
    workflow: Workflow, item: StartItem, version: WorkflowVersion | None, api_key_id: int | None
) -> tuple[Run, bool]:
    """Start one item of a batch of a keyed workflow; a skipped singleton answers its active run."""
    try:
        return start_run(
            workflow, item.input, item.idempotency_key, version, item.priority, api_key_id=api_key_id
        )
    except startkeys.SingletonActive as skipped:
        return Run.objects.get(pk=skipped.run_id), False


def start_version_id(workflow: Workflow, version: WorkflowVersion | None) -> int:
    """The version a start pins: `version` (published), else the workflow's active one."""
    version_id = version.pk if version is not None else workflow.active_version_id
    if version_id is None:
        raise Conflict(f"Workflow {workflow.slug!r} has no active version: publish one first.")
    if version is not None and not version.is_published:
        raise Conflict(f"Version {version.number} is a draft; only published versions can run.")
    return version_id


def check_items(
    workflow: Workflow, schema: Any, items: Sequence[StartItem]
) -> tuple[list[str], dict[int, int], list[Issue]]:
    """Check every item; return their request hashes, each item's first item of the same key, and the issues.

    `firsts` maps an item to itself, or to the earlier item of the batch that has its key.
    """
    hashes: list[str] = []
    firsts: dict[int, int] = {}
    by_key: dict[str, int] = {}
    issues: list[Issue] = []
    for index, item in enumerate(items):
        found = item_issues(workflow, schema, item)
        issues += [replace(issue, path=f"items[{index}].{issue.path}") for issue in found]
        hashes.append("" if found else hashlib.sha256(canonical_json(item.input).encode()).hexdigest())
        first = by_key.setdefault(item.idempotency_key, index) if item.idempotency_key else index
        firsts[index] = first
        if first != index and not found and hashes[first] and hashes[first] != hashes[index]:
            message = f"is also the key of item {first}, with another input: use a key per run."
            issues.append(Issue(f"items[{index}].idempotency_key", message, "duplicate_key"))
    return hashes, firsts, issues


def item_issues(workflow: Workflow, schema: Any, item: StartItem) -> list[Issue]:
    """What is wrong with one item: its input (shape, size, schema) and its priority."""
    issues = []
    try:
        check_input(item.input)
    except Invalid as exc:
        issues.append(
            Issue("input", exc.message.removeprefix("input ").removeprefix("input: "), "invalid_input")
        )
    else:
        issues += check_run_input(schema, item.input)
    key = item.idempotency_key
    if key is not None and not (isinstance(key, str) and 0 < len(key) <= 200):
        issues.append(Issue("idempotency_key", "must be a string of 1 to 200 characters", "invalid"))
    problem = priorities.check_priority(item_priority(workflow, item))
    if problem is not None:
        issues.append(Issue("priority", problem.removeprefix("priority "), "invalid"))
    return issues


def item_priority(workflow: Workflow, item: StartItem) -> int:
    return workflow.default_priority if item.priority is None else item.priority


def existing_runs(
    workflow: Workflow, items: Sequence[StartItem], indexes: list[int], hashes: list[str]
) -> dict[int, Run]:
    """The runs that already hold the keys of these items; refuse the batch for any other input."""
    if not indexes:
        return {}
    keys = {items[i].idempotency_key: i for i in indexes}
    found = Run.objects.select_related("workflow", "version").filter(
        workflow=workflow, idempotency_key__in=keys
    )
    runs = {keys[run.idempotency_key]: run for run in found}
    if len(runs) < len(keys):  # its run was deleted between our INSERT and this read
        raise Conflict("A run holding one of these idempotency keys was just deleted; send the batch again.")
    clashes = [
        Issue(
            f"items[{i}].idempotency_key",
            f"{items[i].idempotency_key!r} was already used for run {run.pk} with a different input; "
            "use a new key for a new run.",
            "key_reused",
        )
        for i, run in sorted(runs.items())
        if run.request_hash != hashes[i]
    ]
    if clashes:
        raise Conflict(
            f"{len(clashes)} idempotency keys were used before with other inputs; see errors.", clashes
        )
    return runs


def new_run(
    workflow: Workflow,
    version: WorkflowVersion | None,
    item: StartItem,
    request_hash: str,
    run_id: int,
    status: str,
    at: Any,
) -> Run:
    """The Run a batch wrote, built from what the statement returned (no read back)."""
    run = Run(
        id=run_id,
        workflow=workflow,
        version=version,
        status=status,
        input=item.input,
        idempotency_key=item.idempotency_key or None,
        request_hash=request_hash,
        priority=item_priority(workflow, item),
        created_at=at,
    )
    run._state.adding, run._state.db = False, "default"
    return run


def notify_in_chunks(run_ids: list[int]) -> None:
    for start in range(0, len(run_ids), NOTICE_RUNS):
        notify_committed(run_ids[start : start + NOTICE_RUNS])


def pause_workflow(workflow: Workflow, user: Any = None) -> None:
    """Hold new runs of a workflow: they are recorded as waiting; runs in flight go on."""
    with transaction.atomic():
        Workflow.objects.filter(pk=workflow.pk).update(paused=True)
        audit.record(user, "workflow.pause", workflow)


def resume_workflow(workflow: Workflow, user: Any = None) -> int:
    """Let a paused workflow run again; start its waiting runs, oldest first."""
    with transaction.atomic():
        Workflow.objects.select_for_update().filter(pk=workflow.pk).update(paused=False)
        waiting = list(  # keyed runs wait for their turn (runs/startkeys.py), not for the pause
            Run.objects.filter(workflow=workflow, status=RunStatus.WAITING, start_key__isnull=True)
            .order_by("id")
            .values_list("id", flat=True)
        )
        transitions.resume_runs(waiting)
        RunEvent.objects.bulk_create(event("run.started", run_id) for run_id in waiting)
        audit.record(user, "workflow.resume", workflow, started=len(waiting))
        transaction.on_commit(lambda: notify_committed(waiting))
    return len(waiting)


def get_run(run_id: int) -> Run:
    try:
        return Run.objects.select_related("workflow", "version").get(pk=run_id)
    except Run.DoesNotExist:
        raise NotFound(f"No run with id {run_id}.") from None


# --------------------------------------------------------------------------- operator actions


def cancel_run(run_id: int, reason: str = "", user: Any = None) -> Run:
    """Cancel a running run: queued nodes never start, running results are ignored.

    Its child runs still going are cancelled with it, in the same transaction; a child run
    cancelled on its own fails its parent node (childlinks.py). A run with succeeded nodes
    to undo compensates (sagas.py), in the same transaction too.
    """
    with transaction.atomic():
        run = locked_run(run_id)
        if not cancel_locked(run, reason, user):
            raise Conflict(
                f"Run {run_id} is already {run.status}; only running or waiting runs can be cancelled."
            )
        audit.record(user, "run.cancel", run, reason=reason)
        childlinks.settle_parents([run.pk])
    return run


def cancel_locked(run: Run, reason: str, user: Any) -> bool:
    """Cancel a locked run and its open child runs, deepest last; return whether it was going."""
    if not transitions.cancel_run(run, timezone.now()):
        return False
    Wait.objects.filter(run=run, closed_at__isnull=True).update(
        closed_at=run.finished_at, outcome="cancelled"
    )
    record_events(event("run.cancelled", run.pk, data={"reason": reason, "by": audit.actor_label(user)}))
    open_children = ChildRun.objects.filter(parent_run=run, settled_at__isnull=True)
    for link in open_children.order_by("id"):
        child = locked_run(link.child_id)
        cancel_locked(child, f"its parent run {run.pk} was cancelled", user)
    childlinks.close_calls(open_children, f"Run {run.pk} was cancelled; its child run was cancelled with it.")
    open_children.update(settled_at=timezone.now())
    if sagas.begin_compensations([run.pk]):  # it ends when its steps are done
        run.status = RunStatus.COMPENSATING
    else:
        transaction.on_commit(lambda: after_cancel(run.pk))
    return True


def after_cancel(run_id: int) -> None:
    """Tell workers and pages of a committed cancel; Redis away only delays what they see.

    Without the mark a batchable step already queued still runs, and its result is dropped
    (the run is cancelled in Postgres); the page catches up at its next refresh.
    """
    try:
        bus.mark_cancelled(run_id)
        bus.publish_runs_finished([(run_id, RunStatus.CANCELLED)])
    except redis.RedisError as exc:
        log.warning("run %s cancelled; its notice was not sent (%s)", run_id, exc)


COMPENSATION_STATUSES = (RunStatus.COMPENSATING, RunStatus.COMPENSATED, RunStatus.COMPENSATION_FAILED)


def locked_run(run_id: int) -> Run:
    """Lock a run for an operator's change, its parent run first (parents.lock_parents)."""
    childlinks.lock_parents([run_id])
    try:
        return Run.objects.select_for_update().get(pk=run_id)
    except Run.DoesNotExist:
        raise NotFound(f"No run with id {run_id}.") from None


def replay_dead_letter(letter_id: int, user: Any = None, edited_input: Any = None) -> Run:
    """Re-run a dead node within its run, keeping every completed node's output.

    The node gets a fresh retry budget; the nodes that were blocked by its death go back to
    pending; the run is running again. A letter can be replayed once: if the node dies
    again, the new dead letter is the one to replay.

    With `edited_input` (a JSON object), the node is given it as its run input, on this
    replay, its retries and later replays; the run's input and every other node are left
    as they are (their outputs carry the fix on). Without, the node is given what it was
    given before.
    """
    if edited_input is not None:
        check_input(edited_input)
    with transaction.atomic():
        letter = locked_letter(letter_id)
        run = locked_run(letter.run_id)
        if run.status == RunStatus.CANCELLED:
            raise Conflict(f"Run {run.pk} was cancelled; its dead letters can only be discarded.")
        if run.status in COMPENSATION_STATUSES:
            raise Conflict(
                f"Run {run.pk} is {run.status}: it undid (or is undoing) its work, so its nodes cannot "
                "run again; discard the dead letter, after undoing by hand what its step could not."
            )
        node = NodeRun.objects.select_for_update().get(pk=letter.node_run_id)
        graph = load_graph(run.version_id)
        states = {n.node_id: engine.NodeState(n.status, n.tries) for n in run.nodes.all()}
        resets = engine.replay_resets(graph, node.node_id, states)
        if not replay(letter, run, node, resets, edited_input):  # the atomic block undoes it all
            raise Conflict(
                f"Node {node.node_id!r} of run {run.pk} is {node.status}, not dead: it cannot be replayed."
            )
        resolve_letter(letter, DeadLetter.REPLAYED, user)
        by = audit.actor_label(user)
        edited = {} if edited_input is None else {"edited_input": edited_input}
        record_events(
            event(
                "node.replayed", run.pk, node.node_id, node.attempt, {"letter": letter.pk, "by": by, **edited}
            )
        )
        audit.record(user, "deadletter.replay", letter, run=run.pk, node=node.node_id, **edited)
        transaction.on_commit(lambda: notify_committed([run.pk]))
    return run


def replay(letter: DeadLetter, run: Run, node: NodeRun, resets: list[str], edited_input: Any) -> bool:
    """Replay the letter's dead node, or its dead map item (whose edited input is the item)."""
    if letter.map_item_id is not None:
        edits = {} if edited_input is None else {"item": edited_input}
        return transitions.replay_item(run, letter.map_item_id, resets, edits)
    edits = {} if edited_input is None else {"input_override": edited_input}
    return transitions.replay_node(run, node.pk, resets, edits)


def discard_dead_letter(letter_id: int, reason: str, user: Any = None) -> DeadLetter:
    """Close a dead letter without replaying it; the reason is kept."""
    if not reason.strip():
        raise Invalid("reason: say why the dead letter is discarded.")
    with transaction.atomic():
        letter = locked_letter(letter_id)
        resolve_letter(letter, DeadLetter.DISCARDED, user, reason)
        by = audit.actor_label(user)
        record_events(
            event("deadletter.discarded", letter.run_id, letter.node_id, letter.attempt, {"by": by})
        )
        audit.record(user, "deadletter.discard", letter, reason=reason)
    return letter


def locked_letter(letter_id: int) -> DeadLetter:
    try:
        letter = DeadLetter.objects.select_for_update().get(pk=letter_id)
    except DeadLetter.DoesNotExist:
        raise NotFound(f"No dead letter with id {letter_id}.") from None
    if letter.status != DeadLetter.OPEN:
        raise Conflict(
            f"Dead letter {letter_id} was already {letter.status} at {letter.resolved_at:%Y-%m-%d %H:%M:%S}; "
            "if the node died again, replay its newer dead letter."
        )
    return letter


def resolve_letter(letter: DeadLetter, status: str, user: Any, reason: str = "") -> None:
    letter.status, letter.resolved_at, letter.reason = status, timezone.now(), reason
    letter.resolved_by = user if getattr(user, "is_authenticated", False) else None
    letter.save(update_fields=["status", "resolved_at", "resolved_by", "reason"])


def run_output(run: Run) -> dict[str, Any]:
    """A run's output: the outputs of its final nodes (those with no successor) that succeeded."""
    graph = load_graph(run.version_id)
    finals = [n for n in graph.order if not graph.successors(n)]
    rows = NodeRun.objects.filter(run=run, node_id__in=finals, status=NodeStatus.SUCCEEDED)
    outputs = dict(rows.values_list("node_id", "output"))
    return {n: outputs[n] for n in finals if n in outputs}
