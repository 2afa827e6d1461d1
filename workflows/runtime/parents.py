"""A child run's end reaching its parent: the parent node succeeds with the child's output,
or fails naming what went wrong in the child.

`settle_parents` runs inside the transaction that ends the child run (the scheduler's
finish, an operator's cancel): the child is finished exactly when its parent node has moved
on, so no kill -9 between the two can leave a parent waiting on a child that has ended.
Each move is the conditional UPDATE of `transitions.settle_children` (`status = 'waiting'`
and the link's attempt): a parent that was cancelled meanwhile, or has retried into a new
attempt, is left alone and the link is only closed. The parents' schedulers are told after
the commit; if that notice is lost, the reconciler's stalled-run scan advances them.

A child started by an agent's tool call (the link names its step: workflows/agents/tools.py)
does not end its parent node: its output, or its failure as an error told to the model,
becomes the step's result, and the agent's attempt is queued again in the same transaction
(`settle_calls`), its job enqueued after the commit (a lost one is the reconciler's).
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from workflows.core import agent
from workflows.core.children import run_output
from workflows.core.graph import COMPENSATE_SUFFIX
from workflows.core.states import RUN_FINISHED, NodeStatus as N, RunStatus as R
from workflows.runtime import bus, jobs, transitions
from workflows.runtime.transitions import Awake, InputRow
from workflows.store.graphs import load_graph
from workflows.store.models import AgentStep, ChildRun, NodeRun, Run, RunEvent


@dataclass(frozen=True)
class Family:
    """A run's parent link (None: nobody started it) and its child links, oldest first."""

    parent: ChildRun | None
    children: list[ChildRun]


def family(run_id: int) -> Family:
    """Read the links of a run to its parent and its children, for the API and the run page."""
    parent = ChildRun.objects.filter(child_id=run_id).select_related("parent_run__workflow").first()
    children = list(
        ChildRun.objects.filter(parent_run_id=run_id).select_related("child__workflow").order_by("id")
    )
    return Family(parent, children)


def lock_parents(run_ids: Collection[int]) -> None:
    """Lock the parent runs of these runs, still linked to them, before the runs themselves.

    The lock order, in every transaction that changes runs and nodes: a parent run, then its
    child runs, then nodes (lifecycle.LOCK_RUNS). A cancel takes a run and then its children;
    a child's end (the scheduler's, or an operator's cancel of the child alone) moves its
    parent's node in its own transaction, so it takes the parent first, here, or the two
    deadlock. Call inside the transaction, before the runs are locked or changed.
    """
    parents = ChildRun.objects.filter(child_id__in=run_ids, settled_at__isnull=True).values("parent_run_id")
    list(Run.objects.select_for_update(no_key=True).filter(pk__in=parents).order_by("pk").values_list("pk"))


def settle_parents(child_ids: Collection[int]) -> list[int]:
    """Move the parent nodes of these finished child runs on; return the parent runs moved.

    Call inside the transaction that finished the children.
    """
    if not child_ids:
        return []
    links = list(
        ChildRun.objects.filter(child_id__in=child_ids, settled_at__isnull=True).select_related(
            "child__workflow", "parent_run"
        )
    )
    links = [link for link in links if link.child.status in RUN_FINISHED]
    if not links:
        return []
    results = [(link, result_of(link)) for link in links]
    moved = transitions.settle_children([row for link, row in results if link.agent_step_id is None])
    resumed = settle_calls([(link, row) for link, row in results if link.agent_step_id is not None])
    ChildRun.objects.filter(pk__in=[link.pk for link in links]).update(settled_at=timezone.now())
    done = {row[0] for row in moved} | resumed
    RunEvent.objects.bulk_create(
        RunEvent(
            run_id=link.parent_run_id,
            kind="node.child_finished",
            node_id=link.node_id,
            attempt=link.attempt,
            at=timezone.now(),
            started_at=link.created_at,  # the trace draws the wait from the child's start to its end
            data={"child_run": link.child_id, "status": link.child.status},
        )
        for link in links
        if link.node_run_id in done
    )
    parents = sorted({row[1] for row in moved})  # a resumed agent's job is enough: no notice
    if parents:
        transaction.on_commit(lambda: bus.notify(parents))
    return parents


def settle_calls(ends: list[tuple[ChildRun, Awake]]) -> set[int]:
    """Give agents' tool calls their children's results and queue the agents again (see
    workflows/agents/tools.py); return the node rows queued."""
    if not ends:
        return set()
    now = timezone.now()
    # Locked in one order: a child ending at the same moment in another transaction waits
    # here, then sees this one's steps settled (else each would think the other still runs).
    agents_rows = sorted({link.node_run_id for link, _ in ends})
    list(NodeRun.objects.select_for_update().filter(pk__in=agents_rows).order_by("pk").values_list("pk"))
    for link, end in ends:
        step = AgentStep.objects.filter(pk=link.agent_step_id, status=agent.WAITING)  # type: ignore[misc]  # an agent's link always has its step (agent_step_id is nullable for the others)
        if end.status == N.SUCCEEDED:
            step.update(status=agent.OK, result=json.loads(end.output or "null"), finished_at=now)
        else:
            step.update(
                status=agent.ERROR, error=agent.bounded(end.error, agent.ERROR_CHARS), finished_at=now
            )
    still = set(
        AgentStep.objects.filter(node_run_id__in=agents_rows, status=agent.WAITING).values_list(
            "node_run_id", flat=True
        )
    )
    ready = {link.node_run_id: link for link, _ in ends if link.node_run_id not in still}  # all calls ended
    rows = [jobs.ready(i, load_graph(link.parent_run.version_id), link.node_id) for i, link in ready.items()]
    packed = jobs.pack(rows, 1, direct=False)
    attempts = {i: link.attempt for i, link in ready.items()}
    params = {"attempts": [attempts[i] for job in packed for i in job.noderun_ids]}
    moved: set[int] = set()
    jobs.claim_packed(lambda p: remember(transitions.resume_agents(p), moved), packed, params)
    return moved


def close_calls(links: QuerySet[ChildRun], reason: str) -> None:
    """End the waiting tool calls of these links as failed (their agent's run was cancelled)."""
    AgentStep.objects.filter(child_link__in=links, status=agent.WAITING).update(
        status=agent.FAILED, error=reason, finished_at=timezone.now()
    )


def remember(rows: list[InputRow], into: set[int]) -> list[InputRow]:
    into.update(row.noderun_id for row in rows)
    return rows


def result_of(link: ChildRun) -> Awake:
    """The parent node's result: the child's output, or an error naming the child's failure."""
    child = link.child
    label = f"Child run {child.pk} of workflow {child.workflow.slug!r}"
    if child.status == R.SUCCEEDED:
        output = child_output(child)
        text = json.dumps(output)
        limit = settings.SWITCHYARD["MAX_OUTPUT_BYTES"]
        if len(text.encode()) > limit:
            error = f"{label} succeeded, but its output is {len(text.encode())} bytes; the limit is {limit}."
            return Awake(link.node_run_id, link.attempt, N.FAILED, None, error)
        return Awake(link.node_run_id, link.attempt, N.SUCCEEDED, text)
    undone = {R.COMPENSATED: " (then compensated)", R.COMPENSATION_FAILED: " (then its compensation failed)"}
    after = undone.get(R(child.status), "")
    failure = failure_of(child)
    if child.status == R.CANCELLED or failure is None:
        return Awake(link.node_run_id, link.attempt, N.FAILED, None, f"{label} was cancelled{after}.")
    return Awake(link.node_run_id, link.attempt, N.FAILED, None, f"{label} failed{after}: {failure}")


def child_output(child: Run) -> Any:
    outputs = dict(NodeRun.objects.filter(run=child, status=N.SUCCEEDED).values_list("node_id", "output"))
    return run_output(load_graph(child.version_id), outputs)


def failure_of(child: Run) -> str | None:
    """The child's first dead node (not a compensation step), or None when none is dead."""
    dead = (
        NodeRun.objects.filter(run=child, status=N.DEAD)
        .exclude(node_id__endswith=COMPENSATE_SUFFIX)
        .order_by("finished_at", "id")
        .first()
    )
    if dead is None:
        return None
    return f"node {dead.node_id!r} is dead after {dead.tries} attempt(s): {dead.error[:1000]}"
