"""One run as the run page shows it: header, node table, DAG states and trace spans.

The page's first load and the websocket consumer both build it here, and both render its
fragments with the same templates.
"""

from __future__ import annotations

from typing import Any

from django.template.loader import render_to_string

from controlplane import access
from workflows.agents import steps as agents, tree as agenttree
from workflows.core.agent import AGENT
from workflows.core.compensation import given_by, is_step, step_node, steps_to_run, undone_by
from workflows.core.states import NODE_TERMINAL, NodeStatus, RunStatus
from workflows.llm import usage
from workflows.runs import actions as runs, edits, mapitems
from workflows.runtime import parents as childlinks
from workflows.store.graphs import load_graph
from workflows.store.models import ChildRun, DeadLetter, LLMCall, NodeRun, Run, RunEvent, Wait

# A waiting node's wait opens with `node.waiting` and is closed by one of WAIT_ENDS.
WAIT_ENDS = ("approval.decided", "node.woken", "node.expired")
TRACE_KINDS = (
    "node.attempt",
    "node.retry_scheduled",
    "node.replayed",
    "run.rerun",
    "node.child_finished",
    "node.waiting",
    *WAIT_ENDS,
)
FRAGMENTS = {
    "run-header": "monitoring/fragments/run_header.html",
    "run-nodes": "monitoring/fragments/run_nodes.html",
    "run-compensation": "monitoring/fragments/run_compensation.html",
    "run-family": "monitoring/fragments/run_family.html",
    "run-output": "monitoring/fragments/run_output.html",
}


def epoch(value: Any) -> float | None:
    return value.timestamp() if value is not None else None


def load(run: Run, user: Any, after_span: int = 0) -> dict[str, Any]:
    """Return the run page's context: run, nodes, open letters, spans after `after_span`."""
    nodes = list(run.nodes.order_by("id"))
    attach_waits(run, nodes)
    attach_progress(nodes)
    spans = list(
        RunEvent.objects.filter(run=run, kind__in=TRACE_KINDS, id__gt=after_span)
        .order_by("id")
        .values("id", "kind", "node_id", "attempt", "started_at", "at", "worker", "data")
    )
    letters = list(
        DeadLetter.objects.filter(run=run).order_by("-id").values("id", "node_id", "status", "reason")
    )
    return {
        "run": run,
        "nodes": nodes,
        "compensation": compensation_steps(run, nodes),
        "letters": letters,
        "spans": spans,
        "can_cancel": access.can(user, "cancel_run") and run.status in (RunStatus.RUNNING, RunStatus.WAITING),
        "can_rerun": access.can(user, "rerun_node"),
        "finished": run.status not in (RunStatus.RUNNING, RunStatus.WAITING, RunStatus.COMPENSATING),
        "llm": usage.run_totals(run.pk),
        "output": runs.run_output(run),
        "family": childlinks.family(run.pk),
        "agents": agent_nodes(run),
    }


def agent_nodes(run: Run) -> set[str]:
    """The ids of the run's agent nodes: a parked agent's attempt is drawn running under its waits."""
    return {n.id for n in load_graph(run.version_id).nodes.values() if n.kind == AGENT}


def compensation_steps(run: Run, nodes: list[NodeRun]) -> list[NodeRun]:
    """A saga's steps in the order they run (newest node undone first), each with `undoes`."""
    steps = {n.node_id: n for n in nodes if is_step(n.node_id)}
    if not steps:
        return []
    done = sorted(
        (n for n in nodes if n.status == NodeStatus.SUCCEEDED and not is_step(n.node_id)),
        key=lambda n: (n.finished_at, n.pk),
    )
    order = [s for s in steps_to_run(load_graph(run.version_id), [n.node_id for n in done]) if s in steps]
    for node_id in order:
        steps[node_id].undoes = undone_by(node_id)  # type: ignore[attr-defined]  # shown by the template beside the step
    return [steps[node_id] for node_id in order]


def attach_waits(run: Run, nodes: list[NodeRun]) -> None:
    """Give each waiting node its open Wait as `n.wait`: what it waits for, since, due when."""
    if not any(n.status == NodeStatus.WAITING for n in nodes):
        return
    open_waits = {w.node_run_id: w for w in Wait.objects.filter(run=run, closed_at__isnull=True)}
    for n in nodes:
        n.wait = open_waits.get(n.pk)  # type: ignore[attr-defined]  # shown by the template beside the node


def attach_progress(nodes: list[NodeRun]) -> None:
    """Give each map node its items' progress as `n.progress` (None for other nodes)."""
    progress = mapitems.progress(n.pk for n in nodes)
    for n in nodes:
        n.progress = progress.get(n.pk)  # type: ignore[attr-defined]  # shown by the template beside the node


def open_child_waits(run: Run, nodes: list[NodeRun]) -> dict[str, list[dict[str, Any]]]:
    """node id -> the child runs a waiting node waits for now (a workflow.run node's, an
    agent's workflow tool calls'), each with its start: the trace draws them until they end."""
    if not any(n.status == NodeStatus.WAITING for n in nodes):
        return {}
    found: dict[str, list[dict[str, Any]]] = {}
    links = ChildRun.objects.filter(parent_run=run, settled_at__isnull=True).order_by("id")
    for node_id, attempt, created, child in links.values_list("node_id", "attempt", "created_at", "child_id"):
        found.setdefault(node_id, []).append({"attempt": attempt, "start": epoch(created), "child": child})
    return found


def live_data(ctx: dict[str, Any]) -> dict[str, Any]:
    """The part of the context the page's scripts draw: node states, spans, run timing."""
    run = ctx["run"]
    children = open_child_waits(run, ctx["nodes"])
    return {
        "run": {
            "id": run.pk,
            "status": run.status,
            "created": epoch(run.created_at),
            "finished": epoch(run.finished_at),
        },
        "nodes": {
            n.node_id: {
                "status": n.status,
                "attempt": n.attempt,
                "started": epoch(n.started_at)
                if n.status in (NodeStatus.RUNNING, NodeStatus.WAITING)
                else None,
                "items": getattr(n, "progress", None),
                "queued": epoch(n.queued_at) if n.status in (NodeStatus.QUEUED, NodeStatus.RUNNING) else None,
                "due": epoch(n.due_at) if n.status == NodeStatus.RETRYING else None,
                "children": children.get(n.node_id, []),
                "agent": n.node_id in ctx.get("agents", ()),
            }
            for n in ctx["nodes"]
        },
        "spans": [trace_item(s) for s in ctx["spans"]],
    }


def trace_item(s: dict[str, Any]) -> dict[str, Any]:
    """One history event as the trace draws it: an attempt, a backoff, a wait for a child run
    (a workflow.run node's, an agent's workflow tool call's), or a reset (replay, re-run).

    A retry's backoff runs from the failed attempt's end to when the retry is available
    (scheduled at + delay); the queue wait before an attempt runs from when it was queued
    (recorded in its span) to its start, and is not drawn when that is unknown. A waiting
    node's wait (an approval, an event, a timer) opens with `node.waiting` and ends with the
    decision, the event or the deadline (`wait_end`): the page pairs them by node and
    attempt, and draws a wait still open up to now. A map's wait is its attempt.
    """
    data = s["data"] or {}
    item = {"id": s["id"], "node": s["node_id"], "attempt": s["attempt"], "end": epoch(s["at"])}
    if s["kind"] == "node.attempt":
        return {
            **item,
            "kind": "attempt",
            "start": epoch(s["started_at"]),
            "queued": data.get("queued_at"),
            "status": data.get("status", ""),
            "worker": s["worker"],
            "log": bool(data.get("log")),
        }
    if s["kind"] == "node.waiting":
        what = data.get("kind") or "wait"
        return {
            **item,
            "kind": "wait_start" if what != "map" else "note",
            "start": epoch(s["at"]),
            "what": what,
        }
    if s["kind"] in WAIT_ENDS:
        return {**item, "kind": "wait_end", "start": epoch(s["at"]), "how": s["kind"]}
    if s["kind"] == "node.retry_scheduled":
        at = epoch(s["at"]) or 0.0
        return {**item, "kind": "backoff", "start": at, "end": at + float(data.get("delay_seconds") or 0)}
    if s["kind"] == "node.child_finished":  # the attempt waited for this child run
        return {**item, "kind": "wait", "start": epoch(s["started_at"]), "child": data.get("child_run")}
    return {**item, "kind": "reset", "start": epoch(s["at"]), "nodes": data.get("nodes") or [s["node_id"]]}


def render(ctx: dict[str, Any]) -> dict[str, str]:
    return {target: render_to_string(name, ctx) for target, name in FRAGMENTS.items()}


# The LLM calls a node's panel lists: a map node's items may have made thousands (each
# recorded under the map node, `item N` its step); the totals count them all.
CALLS_SHOWN = 50


def node_detail(run: Run, node_id: str) -> dict[str, Any]:
    """A node of a run: its input (run input and upstream outputs), output, error, attempts."""
    node = NodeRun.objects.get(run=run, node_id=node_id)
    predecessors = given_by(load_graph(run.version_id), node_id)  # a step: the node it undoes
    upstream = dict(
        NodeRun.objects.filter(run=run, node_id__in=predecessors, status=NodeStatus.SUCCEEDED).values_list(
            "node_id", "output"
        )
    )
    attempts = RunEvent.objects.filter(run=run, node_id=node_id).order_by("id")
    calls = list(LLMCall.objects.filter(node_run=node).order_by("id")[:CALLS_SHOWN])
    more = LLMCall.objects.filter(node_run=node).count() - CALLS_SHOWN if len(calls) == CALLS_SHOWN else 0
    return {
        "run": run,
        "node": node,
        "upstream": upstream,
        "attempts": attempts,
        "llm_calls": calls,
        "llm_calls_more": more,
        "llm": usage.node_totals(node.pk) if calls else None,
        "is_llm": node_is_llm(run, node_id),
        "items": mapitems.progress([node.pk]).get(node.pk),
        "edits": edits.input_edits(run.pk, node_id),
        **agent_steps(run, node),
    }


def node_is_llm(run: Run, node_id: str) -> bool:
    """Whether a node calls an LLM (its panel shows the streamed text and the calls)."""
    return step_node(load_graph(run.version_id), node_id).handler.startswith("llm.")


def agent_steps(run: Run, node: NodeRun) -> dict[str, Any]:
    """An agent node's steps as the node panel draws them (none for other kinds)."""
    steps = agents.steps_of(node.pk)
    if not steps and step_node(load_graph(run.version_id), node.node_id).kind != AGENT:
        return {"is_agent": False}
    polling = node.status not in NODE_TERMINAL  # opened before its first attempt: it polls too
    turns = agenttree.build(steps, LLMCall.objects.filter(node_run=node))
    return {
        "is_agent": True,
        "turns": turns,
        "step_count": len(steps),
        "polling": polling,
        "run": run,
        "node": node,
    }


ITEMS_PAGE = 50


def node_items(run: Run, node_id: str, bucket: str | None, after: int) -> dict[str, Any]:
    """A page of a map node's items after index `after` (-1: from the first), in one bucket or all."""
    node = mapitems.get_map_node(run.pk, node_id)
    rows = list(mapitems.items_of(node, bucket).filter(index__gt=after)[: ITEMS_PAGE + 1])
    return {
        "run": run,
        "node": node,
        "rows": rows[:ITEMS_PAGE],
        "next_after": rows[ITEMS_PAGE - 1].index if len(rows) > ITEMS_PAGE else None,
        "bucket": bucket or "",
        "buckets": tuple(mapitems.BUCKETS),
        "progress": mapitems.progress([node.pk]).get(node.pk),
    }
