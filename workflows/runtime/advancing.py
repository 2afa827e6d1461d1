"""Advancing runs: read snapshots, decide with the engine, apply the decisions.

Every state change is a conditional UPDATE (`... WHERE status = <expected>`), in
transitions.py: a decision taken twice, by two schedulers or by a scheduler and the
reconciler, changes a row once. Each kind of decision is applied by one statement (dead
letters: one transaction) that also appends its history events, so a plan needs no
transaction around it: a scheduler that dies halfway leaves every change whole, and the
rest is decided again from Postgres. Claims, skips and retry schedules commit relaxed
(lifecycle.RELAXED_COMMIT); dead nodes and finished runs synchronously. Jobs are enqueued
and runs announced only after their statement commits.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from workflows.core import engine, priorities
from workflows.core.compensation import advance_steps, given_by, step_node, steps_to_run
from workflows.core.graph import Graph
from workflows.core.signatures import error_signature
from workflows.core.states import NodeStatus, RunStatus
from workflows.runtime import bus, compensations as sagas, jobs, kinds, parents as childlinks, transitions
from workflows.runtime.transitions import FinishRun, Kill, NodeRow, Retry, Skip
from workflows.store.graphs import load_graph
from workflows.store.history import event
from workflows.store.models import DeadLetter, NodeRun, RunEvent
from workflows.store.payloads import from_json
from workflows.store.statements import NODES, RUNS


@dataclass
class RunSnapshot:
    run_id: int
    version_id: int
    epoch: int
    ids: dict[str, int] = field(default_factory=dict)
    states: dict[str, engine.NodeState] = field(default_factory=dict)
    input: Any = None


@dataclass
class Plan:
    """Decisions for many runs, applied together in one transaction."""

    ready: list[jobs.Ready] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)
    retries: list[Retry] = field(default_factory=list)
    kills: list[Kill] = field(default_factory=list)
    finishes: list[FinishRun] = field(default_factory=list)

    def add(self, snap: RunSnapshot, graph: Graph, decision: engine.Decision) -> None:
        if isinstance(decision, engine.FinishRun):
            self.finishes.append(FinishRun(snap.run_id, snap.epoch, decision.status))
            return
        noderun_id = snap.ids[decision.node_id]
        if isinstance(decision, engine.EnqueueNode | engine.WaitNode):  # kinds.claim_ready tells them apart
            self.ready.append(jobs.ready(noderun_id, graph, decision.node_id))
        elif isinstance(decision, engine.SkipNode):
            self.skips.append(Skip(noderun_id, decision.status))
        elif isinstance(decision, engine.RetryNode):
            self.retries.append(Retry(noderun_id, decision.tries, decision.delay))
        else:
            self.kills.append(Kill(noderun_id, decision.tries))


SNAPSHOT_SQL = f"""
SELECT n.id, n.run_id, n.node_id, n.status, n.tries, r.version_id, r.epoch, n.retryable
FROM {NODES} n JOIN {RUNS} r ON r.id = n.run_id
WHERE r.id = ANY(%(runs)s::bigint[]) AND n.run_id = ANY(%(runs)s::bigint[]) AND r.status = '{RunStatus.RUNNING}'
"""

CONDITION_DATA_SQL = f"""
SELECT n.run_id, n.node_id, n.output, r.input
FROM {NODES} n JOIN {RUNS} r ON r.id = n.run_id
WHERE r.id = ANY(%(runs)s::bigint[]) AND n.run_id = ANY(%(runs)s::bigint[]) AND n.status = '{NodeStatus.SUCCEEDED}'
"""


def known_states(notices: list[bus.Notice]) -> tuple[set[int], list[list[Any]]]:
    """The runs these notices name, and the node rows they carry that may stand for a read.

    A run's rows stand only when one notice of the batch names it: two notices of one run
    may have been written in either order, so such a run is read again.
    """
    named = Counter(run_id for notice in notices for run_id in notice.run_ids)
    return set(named), [row for notice in notices for row in notice.rows if named[row[1]] == 1]


def load_snapshots(run_ids: Collection[int], known: Iterable[Sequence[Any]] = ()) -> dict[int, RunSnapshot]:
    """Read the state of every node of these runs (only runs still running).

    `known` holds node rows (NodeRow, or lists from a notice's JSON) that a notice carried: their runs
    are not read again. Its writer took them in the statement that changed the run, and
    only when no other node of the run was queued or running: no worker can have finished
    one since, and every other change (a claim, a cancel, a replay) is applied by a
    conditional statement and sends its own notice, so a decision made from these rows is
    at worst a no-op. This saves the scheduler a round trip on every idle hop.
    """
    snaps: dict[int, RunSnapshot] = {}
    add_rows(snaps, known)
    unknown = [run_id for run_id in run_ids if run_id not in snaps]
    if unknown:
        with connection.cursor() as cur:
            cur.execute(SNAPSHOT_SQL, {"runs": unknown})
            add_rows(snaps, cur.fetchall())
    conditional = [s.run_id for s in snaps.values() if load_graph(s.version_id).has_conditions]
    if conditional:
        add_condition_data(snaps, conditional)
    return snaps


def add_rows(snaps: dict[int, RunSnapshot], rows: Iterable[Sequence[Any]]) -> None:
    for row in rows:
        n = NodeRow(*row)
        snap = snaps.setdefault(n.run_id, RunSnapshot(n.run_id, n.version_id, n.epoch))
        snap.ids[n.node_id] = n.noderun_id
        snap.states[n.node_id] = engine.NodeState(n.status, n.tries, retryable=n.retryable)


def add_condition_data(snaps: dict[int, RunSnapshot], run_ids: list[int]) -> None:
    """Load outputs and input where edge conditions need them (only graphs that have any)."""
    with connection.cursor() as cur:
        cur.execute(CONDITION_DATA_SQL, {"runs": run_ids})
        for run_id, node_id, output, run_input in cur.fetchall():
            snap = snaps[run_id]
            snap.input = json.loads(run_input) if isinstance(run_input, str) else run_input
            value = json.loads(output) if isinstance(output, str) else output
            snap.states[node_id] = engine.NodeState(NodeStatus.SUCCEEDED, snap.states[node_id].tries, value)


def advance_runs(run_ids: Collection[int], workers: int = 1, known: Iterable[Sequence[Any]] = ()) -> int:
    """Decide and apply the next step of each run; return the number of decisions.

    `known`: node rows a notice carried (see load_snapshots).
    """
    if not run_ids:
        return 0
    plan = Plan()
    snaps = load_snapshots(run_ids, known)
    for snap in snaps.values():
        graph = load_graph(snap.version_id)
        for decision in engine.advance(graph, snap.states, snap.input, random.random()):
            plan.add(snap, graph, decision)
    apply_plan(plan, workers)
    others = [run_id for run_id in run_ids if run_id not in snaps]  # rare: finished, or compensating
    undone = advance_compensations(others, workers) if others else 0
    return (
        len(plan.ready) + len(plan.skips) + len(plan.retries) + len(plan.kills) + len(plan.finishes) + undone
    )


def apply_plan(plan: Plan, workers: int) -> None:
    kinds.claim_ready(plan.ready, workers)
    apply_skips(plan.skips)
    apply_retries(plan.retries)
    apply_kills(plan.kills)
    apply_finishes(plan.finishes)


def apply_skips(skips: list[Skip]) -> None:
    if skips:
        transitions.skip_nodes(skips)


def apply_retries(retries: list[Retry]) -> None:
    if retries:
        transitions.schedule_retries(retries)


def apply_kills(kills: list[Kill]) -> None:
    """Mark nodes dead and file a dead letter for each, with what it was given."""
    if not kills:
        return
    with transaction.atomic():
        dead_ids = transitions.mark_dead(kills)
        nodes = list(NodeRun.objects.filter(id__in=dead_ids).select_related("run"))
        given = node_inputs(nodes)
        letters = [dead_letter(node, given[node.pk]) for node in nodes]
        DeadLetter.objects.bulk_create(letters)
        RunEvent.objects.bulk_create(
            event("node.dead", d.run_id, d.node_id, d.attempt, {"error": d.error[:500]}) for d in letters
        )


def dead_letter(node: NodeRun, given: dict[str, Any]) -> DeadLetter:
    return DeadLetter(
        run_id=node.run_id,
        node_run=node,
        node_id=node.node_id,
        attempt=node.attempt,
        error=node.error,
        traceback=node.traceback,
        input_snapshot=given,
        signature=error_signature(node.error),
    )


def node_inputs(nodes: list[NodeRun]) -> dict[int, dict[str, Any]]:
    """Return what each node was given, by row id: the run input (or the edited input a
    replay gave it, then `edited` is true), its predecessors' outputs and its config."""
    if not nodes:
        return {}
    graphs = {node.pk: load_graph(node.run.version_id) for node in nodes}
    upstream = {p for node in nodes for p in given_by(graphs[node.pk], node.node_id)}
    rows = transitions.read_inputs([node.pk for node in nodes], upstream)
    outputs: dict[int, dict[str, Any]] = {}
    for row in rows:
        if row.kind == "output":
            outputs.setdefault(row.run_id, {})[row.node_id] = from_json(row.value)
    run_input = {row.noderun_id: from_json(row.value) for row in rows if row.kind == "claim"}
    snapshots = {}
    for node in nodes:
        graph, done = graphs[node.pk], outputs.get(node.run_id, {})
        snapshot = {
            "input": run_input[node.pk],
            "upstream": {p: done[p] for p in given_by(graph, node.node_id) if p in done},
            "config": step_node(graph, node.node_id).config,
        }
        snapshots[node.pk] = snapshot if node.input_override is None else {**snapshot, "edited": True}
    return snapshots


def apply_finishes(finishes: list[FinishRun]) -> list[int]:
    """End runs; a child run's parent node moves on in the same transaction (childlinks.py).
    Return the runs ended.

    Runs that succeed and are nobody's child, the common end, take one autocommit statement
    (outside a caller's transaction), synchronous like every run's end; the others (failures,
    which may begin compensations, and child runs) one transaction each call.
    """
    if not finishes:
        return []
    ended: list[int] = []
    if not connection.in_atomic_block and all(f.status == RunStatus.SUCCEEDED for f in finishes):
        alone = transitions.finish_runs(finishes, unlinked=True)
        bus.publish_runs_finished(alone)
        ended = [e.run_id for e in alone]
        finishes = [f for f in finishes if f.run_id not in ended]
        if not finishes:
            return ended
    with transaction.atomic():
        childlinks.lock_parents([run_id for run_id, *_ in finishes])
        together = transitions.finish_runs(finishes)
        undoing = set(sagas.begin_compensations([e.run_id for e in together if e.status == RunStatus.FAILED]))
        finished = [e for e in together if e.run_id not in undoing]
        childlinks.settle_parents([e.run_id for e in finished])
    transaction.on_commit(lambda: bus.publish_runs_finished(finished))
    return ended + [e.run_id for e in together]


# Statuses spelled out, not parameters: the partial indexes serve generic plans (pgsession).
DUE_SQL = f"""
(SELECT n.id, n.node_id, r.version_id, n.status FROM {NODES} n JOIN {RUNS} r ON r.id = n.run_id
 WHERE n.status = '{NodeStatus.RETRYING}' AND n.due_at <= %(now)s
 LIMIT %(limit)s)
UNION ALL
(SELECT id, node_id, version_id, status FROM (
    SELECT n.id, n.node_id, r.version_id, n.status, n.due_at,
           r.priority + extract(epoch FROM now() - n.due_at) / {priorities.AGING_SECONDS} AS effective,
           row_number() OVER (
               PARTITION BY r.workflow_id, n.node_id, n.flow_key
               ORDER BY r.priority + extract(epoch FROM now() - n.due_at) / {priorities.AGING_SECONDS} DESC, n.id
           ) AS place
    FROM {NODES} n JOIN {RUNS} r ON r.id = n.run_id
    WHERE n.status = '{NodeStatus.PENDING}' AND n.due_at IS NOT NULL AND r.status = '{RunStatus.RUNNING}'
 ) AS held
 WHERE place <= %(per_node)s ORDER BY place, effective DESC, id LIMIT %(limit)s)
"""


def enqueue_due(workers: int, limit: int = 1000, per_node: int = 100) -> int:
    """Start the next attempt of every node whose backoff has expired, and offer the nodes
    held by their concurrency cap again (capacity.py), highest effective priority first
    (core/priorities.effective: the run's priority, aged by the time held); return how many
    were due.

    Held nodes are offered at most `per_node` per (workflow, node, concurrency key), in turns
    (each one's first, then each one's second, ...): a long queue behind one saturated node
    or key never keeps the held nodes of another from their free places.
    """
    with connection.cursor() as cur:
        cur.execute(DUE_SQL, {"now": timezone.now(), "limit": limit, "per_node": per_node})
        due = cur.fetchall()
    for status in (NodeStatus.RETRYING, NodeStatus.PENDING):
        rows = [
            jobs.ready(i, load_graph(version_id), node_id) for i, node_id, version_id, s in due if s == status
        ]
        kinds.claim_ready(rows, workers, status)
    return len(due)


# --------------------------------------------------------------------------- compensating runs
# A compensating run's steps (core/compensation.py) run one at a time, as tasks: the same
# claims, retries, dead letters as nodes, decided by compensation.advance_steps.

COMPENSATING_SQL = f"""
SELECT n.id, n.run_id, n.node_id, n.status, n.tries, r.version_id, n.retryable
FROM {NODES} n JOIN {RUNS} r ON r.id = n.run_id
WHERE r.id = ANY(%(runs)s::bigint[]) AND n.run_id = ANY(%(runs)s::bigint[]) AND r.status = '{RunStatus.COMPENSATING}'
ORDER BY n.finished_at NULLS LAST, n.id
"""


def advance_compensations(run_ids: Collection[int], workers: int = 1) -> int:
    """Decide and apply the next step of each compensating run among `run_ids`; return how many decisions."""
    with connection.cursor() as cur:
        cur.execute(COMPENSATING_SQL, {"runs": list(run_ids)})
        rows = cur.fetchall()
    by_run: dict[int, list[tuple[Any, ...]]] = {}
    for row in rows:
        by_run.setdefault(row[1], []).append(row)
    plan, ends = Plan(), []
    for run_id, nodes in by_run.items():
        graph = load_graph(nodes[0][5])
        ids = {node_id: noderun_id for noderun_id, _, node_id, *_ in nodes}
        states = {
            node_id: engine.NodeState(status, tries, retryable=retryable)
            for _, _, node_id, status, tries, _, retryable in nodes
        }
        succeeded = [
            node_id
            for _, _, node_id, status, *_ in nodes
            if node_id in graph.nodes and status == NodeStatus.SUCCEEDED
        ]
        steps = [step for step in steps_to_run(graph, succeeded) if step in ids]
        for decision in advance_steps(graph, steps, states, random.random()):
            if isinstance(decision, engine.FinishRun):
                ends.append((run_id, decision.status))
            elif isinstance(decision, engine.EnqueueNode):
                plan.ready.append(jobs.ready(ids[decision.node_id], graph, decision.node_id))
            else:
                plan.add(RunSnapshot(run_id, nodes[0][5], 0, ids), graph, decision)
    apply_plan(plan, workers)
    end_compensations(ends)
    return len(plan.ready) + len(plan.retries) + len(plan.kills) + len(ends)


def end_compensations(ends: list[tuple[int, str]]) -> None:
    """End compensating runs; a child run's parent node moves on in the same transaction."""
    if not ends:
        return
    with transaction.atomic():
        childlinks.lock_parents([run_id for run_id, _ in ends])
        ended = transitions.end_compensations(ends)
        sagas.resolve_compensated_letters([e.run_id for e in ended if e.status == RunStatus.COMPENSATED])
        childlinks.settle_parents([e.run_id for e in ended])
    bus.publish_runs_finished(ended)
