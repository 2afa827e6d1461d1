"""Fork a run at a node: a new run, the nodes above carried over, the fork point and below run.

Decisions (the issue leaves them open):

- The new run is of the origin's workflow, on the origin's version unless another version
  number is given: any published version, or a draft, which is frozen first into a
  published, inactive snapshot exactly as a test run of a draft is (versions/editing.py;
  the snapshot is reused while the draft is unchanged). It takes the origin's input and
  priority; with `edited_input`, the fork point alone is given that as its run input (as a
  replay with edited input gives it: `NodeRun.input_override`), and the nodes below it see
  the fork point's new output.
- Which nodes are carried and which run is core/forks.py: the fork point's ancestors must
  be carried (defined alike in both versions, succeeded or skipped in the origin), or the
  fork is refused naming each; any other node the origin cannot vouch for runs.
- The origin may be in any status, running included: only its finished nodes are read, in
  one snapshot, and the origin is never changed.
- Carried nodes keep the origin's status, output and times, and no attempt of their own:
  their cost stays with the origin, so a fork's LLM usage is what the fork itself spent.
- Its LLM and agent tool calls are `live` by default; `recorded` or `recorded-then-live`
  replays the origin's recorded calls (workflows/llm/replays.py).
- Everything is one transaction: the snapshot of a draft, the run, its nodes, its link
  (store/forks.py), its history and the audit entry; a refusal leaves nothing behind.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.db import IntegrityError, transaction

from workflows.agents import tree
from workflows.core import callhash, forks as plans
from workflows.core.definition import canonical_json
from workflows.core.states import RunStatus
from workflows.runs import actions as runs
from workflows.runtime import transitions
from workflows.store import audit
from workflows.store.errors import Conflict, Invalid, NotFound
from workflows.store.forks import RunFork
from workflows.store.graphs import load_graph
from workflows.store.history import event, record_events
from workflows.store.models import AgentStep, NodeRun, Run, WorkflowVersion
from workflows.store.recordings import RecordedCall
from workflows.versions import editing


def fork_once(
    key: str,
    run_id: int,
    node_id: str,
    version_number: int | None = None,
    edited_input: Any = None,
    user: Any = None,
    calls: str = callhash.LIVE,
) -> tuple[Run, bool]:
    """`fork_run` under an idempotency key; return (the fork, whether it was made now).

    The key is a run's idempotency key in the workflow, as a start's: the same key for the
    same fork (origin, node, version, input, calls) answers the fork made the first time,
    and for anything else (another fork, or a start that took it) is refused (409). Two
    forks racing with one key make one run: the loser's insert meets the unique key and
    reads the winner's.
    """
    request = {"fork_of": run_id, "node_id": node_id, "version": version_number, "input": edited_input}
    request_hash = hashlib.sha256(canonical_json({**request, "calls": calls}).encode()).hexdigest()
    workflow_id = runs.get_run(run_id).workflow_id
    existing = keyed_run(workflow_id, key, request_hash)
    if existing is not None:
        return existing, False
    try:
        fork = fork_run(run_id, node_id, version_number, edited_input, user, calls, key=(key, request_hash))
    except IntegrityError:
        found = keyed_run(workflow_id, key, request_hash)
        if found is None:
            raise
        return found, False
    return fork, True


def keyed_run(workflow_id: int, key: str, request_hash: str) -> Run | None:
    """The run of this workflow that took `key`, if its request was this one; refuse another."""
    run = Run.objects.filter(workflow_id=workflow_id, idempotency_key=key).first()
    if run is not None and run.request_hash != request_hash:
        raise Conflict(
            f"Idempotency-Key {key!r} was used for another request (run {run.pk}); use a new key for a new fork."
        )
    return run


def fork_run(
    run_id: int,
    node_id: str,
    version_number: int | None = None,
    edited_input: Any = None,
    user: Any = None,
    calls: str = callhash.LIVE,
    key: tuple[str, str] | None = None,
) -> Run:
    """Start a fork of run `run_id` at `node_id` on version `version_number` (None: the run's own),
    its LLM and tool calls made `calls` (live, or replayed from the origin's: llm/replays.py);
    `key` is (idempotency key, request hash), given by fork_once."""
    if edited_input is not None:
        runs.check_input(edited_input)
    if calls not in callhash.MODES:
        raise Invalid(f"calls: {calls!r} is not a mode; use one of {', '.join(callhash.MODES)}.")
    with transaction.atomic():
        origin = runs.get_run(run_id)
        origin_graph = load_graph(origin.version_id)
        if node_id not in origin_graph.nodes:
            raise NotFound(f"Run {run_id} has no node {node_id!r}.")
        target = target_version(origin, version_number, user)
        nodes = {n.node_id: n for n in NodeRun.objects.filter(run=origin)}
        statuses = {n: row.status for n, row in nodes.items()}
        target_graph = load_graph(target.pk)
        issues = plans.fork_problems(origin_graph, target_graph, node_id, statuses, target.number)
        if issues:
            why = "; ".join(i.message for i in issues)
            hint = (
                "choose a version that has the node"
                if issues[0].code == "missing_node"
                else "fork at the earliest of these nodes instead, or onto a version that defines them alike"
            )
            raise Invalid(f"Run {run_id} cannot be forked at {node_id!r}: {why}. To go on, {hint}.", issues)
        plan = plans.plan_fork(origin_graph, target_graph, node_id, statuses)
        fork = create(origin, target, plan, nodes, edited_input, key)
        link(origin, fork, plan, edited_input, user, calls)
        transaction.on_commit(lambda: runs.notify_committed([fork.pk]))
    return fork


def is_onto_draft(run_id: int, number: int | None) -> bool:
    """Whether forking run `run_id` onto version `number` freezes a draft (surfaces ask for the editor role)."""
    if number is None:
        return False
    run = runs.get_run(run_id)
    return run.workflow.versions.filter(number=number, status=WorkflowVersion.DRAFT).exists()


def target_version(origin: Run, number: int | None, user: Any) -> WorkflowVersion:
    """The version the fork runs on: the origin's, or number `number` of its workflow (a draft frozen)."""
    if number is None or number == origin.version.number:
        return origin.version
    try:
        version = origin.workflow.versions.get(number=number)
    except WorkflowVersion.DoesNotExist:
        raise NotFound(f"Workflow {origin.workflow.slug!r} has no version {number}.") from None
    return version if version.is_published else editing.freeze_draft(version, user)


def create(
    origin: Run,
    target: WorkflowVersion,
    plan: plans.ForkPlan,
    nodes: dict[str, NodeRun],
    edited_input: Any,
    key: tuple[str, str] | None = None,
) -> Run:
    """Write the fork's run and node rows: carried nodes as in the origin, the others pending."""
    graph = load_graph(target.pk)
    rows = []
    for node_id in graph.order:
        queue = graph.nodes[node_id].queue
        if node_id in plan.carried:
            n = nodes[node_id]
            rows.append(transitions.ForkNode(node_id, queue, n.status, n.output, n.started_at, n.finished_at))
        else:
            override = edited_input if node_id == plan.node_id else None
            rows.append(transitions.ForkNode(node_id, queue, input_override=override))
    request_hash = hashlib.sha256(canonical_json(origin.input).encode()).hexdigest()
    run = Run(
        workflow=origin.workflow,
        version=target,
        input=origin.input,
        idempotency_key=key[0] if key else None,
        request_hash=key[1] if key else request_hash,
        priority=origin.priority,
    )
    return transitions.create_fork(run, rows)


def link(origin: Run, fork: Run, plan: plans.ForkPlan, edited_input: Any, user: Any, calls: str) -> RunFork:
    """Write the fork's link to its origin, its first events and the audit entry."""
    person = user if getattr(user, "is_authenticated", False) else getattr(user, "owner", None)
    row = RunFork.objects.create(
        run=fork,
        origin=origin,
        origin_number=origin.pk,
        node_id=plan.node_id,
        carried=list(plan.carried),
        edited_input=edited_input,
        calls=calls,
        created_by=person,
    )
    by = audit.actor_label(user)
    data = {
        "origin": origin.pk,
        "node": plan.node_id,
        "carried": list(plan.carried),
        "calls": calls,
        "by": by,
    }
    started = "run.waiting" if fork.status == RunStatus.WAITING else "run.started"
    record_events(event(started, fork.pk), event("run.forked", fork.pk, plan.node_id, data=data))
    edited = {} if edited_input is None else {"edited_input": edited_input}
    audit.record(
        user,
        "run.fork",
        origin,
        fork=fork.pk,
        node=plan.node_id,
        version=fork.version.number,
        calls=calls,
        **edited,
    )
    return row


def origin_of(run_id: int) -> RunFork | None:
    """The fork link of a run (None: the run is not a fork)."""
    return RunFork.objects.select_related("origin").filter(run_id=run_id).first()


def calls_of(run_id: int, node_id: str, limit: int = 200) -> list[RecordedCall]:
    """A node's recorded LLM and tool calls (llm/replays.py), oldest first, each with the call it replayed.

    An agent's turns are named in the one numbering the run page uses (agents/tree.py: "turn
    2", not the step's seq, which the stored label keeps to find the turn's LLM call).
    """
    rows = list(
        RecordedCall.objects.select_related("replayed_from")
        .filter(run_id=run_id, node_id=node_id)
        .order_by("id")[:limit]
    )
    steps = AgentStep.objects.filter(node_run__run_id=run_id, node_run__node_id=node_id).order_by("seq")
    names = tree.numbers(list(steps)) if any(r.step.startswith("turn ") for r in rows) else {}
    for row in rows:
        kind, _, seq = row.step.partition(" ")
        if kind == "turn" and seq.isdigit():
            row.step = f"turn {names.get(int(seq), seq)}"  # shown, never saved
    return rows


def origins_of(run_ids: list[int]) -> dict[int, int]:
    """run id -> the id of the run it was forked from, for those of `run_ids` that are forks."""
    return dict(RunFork.objects.filter(run_id__in=run_ids).values_list("run_id", "origin_number"))


def forks_of(run_id: int, limit: int = 50) -> list[RunFork]:
    """The newest forks of a run, each with its run."""
    return list(
        RunFork.objects.select_related("run", "run__version")
        .filter(origin_id=run_id)
        .order_by("-run_id")[:limit]
    )
