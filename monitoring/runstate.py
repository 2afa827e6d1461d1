"""One run as the run page shows it: header, node table, DAG states and trace spans.

The page's first load and the websocket consumer both build it here, and both render its
fragments with the same templates.
"""

from __future__ import annotations

from typing import Any

from django.template.loader import render_to_string

from controlplane import access
from workflows.core.states import NodeStatus, RunStatus
from workflows.models import DeadLetter, NodeRun, Run, RunEvent, Wait

TRACE_KINDS = ("node.attempt", "node.retry_scheduled", "node.replayed", "run.rerun")
FRAGMENTS = {
    "run-header": "monitoring/fragments/run_header.html",
    "run-nodes": "monitoring/fragments/run_nodes.html",
}


def epoch(value: Any) -> float | None:
    return value.timestamp() if value is not None else None


def load(run: Run, user: Any, after_span: int = 0) -> dict[str, Any]:
    """Return the run page's context: run, nodes, open letters, spans after `after_span`."""
    nodes = list(run.nodes.order_by("id"))
    attach_waits(run, nodes)
    spans = list(
        RunEvent.objects.filter(run=run, kind__in=TRACE_KINDS, id__gt=after_span)
        .order_by("id")
        .values("id", "kind", "node_id", "attempt", "started_at", "at", "worker", "data")
    )
    letters = list(DeadLetter.objects.filter(run=run).order_by("-id").values("id", "node_id", "status"))
    return {
        "run": run,
        "nodes": nodes,
        "letters": letters,
        "spans": spans,
        "can_cancel": access.can(user, "cancel_run") and run.status in (RunStatus.RUNNING, RunStatus.WAITING),
        "can_rerun": access.can(user, "rerun_node"),
        "finished": run.status not in (RunStatus.RUNNING, RunStatus.WAITING),
    }


def attach_waits(run: Run, nodes: list[NodeRun]) -> None:
    """Give each waiting node its open Wait as `n.wait`: what it waits for, since, due when."""
    if not any(n.status == NodeStatus.WAITING for n in nodes):
        return
    open_waits = {w.node_run_id: w for w in Wait.objects.filter(run=run, closed_at__isnull=True)}
    for n in nodes:
        n.wait = open_waits.get(n.pk)  # type: ignore[attr-defined]


def live_data(ctx: dict[str, Any]) -> dict[str, Any]:
    """The part of the context the page's scripts draw: node states, spans, run timing."""
    run = ctx["run"]
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
                "started": epoch(n.started_at) if n.status == NodeStatus.RUNNING else None,
                "queued": epoch(n.queued_at) if n.status in (NodeStatus.QUEUED, NodeStatus.RUNNING) else None,
                "due": epoch(n.due_at) if n.status == NodeStatus.RETRYING else None,
            }
            for n in ctx["nodes"]
        },
        "spans": [trace_item(s) for s in ctx["spans"]],
    }


def trace_item(s: dict[str, Any]) -> dict[str, Any]:
    """One history event as the trace draws it: an attempt, a backoff, or a reset (replay, re-run).

    A retry's backoff runs from the failed attempt's end to when the retry is available
    (scheduled at + delay); the queue wait before an attempt is drawn by the page from the
    moment the node became ready (its predecessors' ends, the backoff's end, a reset).
    """
    data = s["data"] or {}
    item = {"id": s["id"], "node": s["node_id"], "attempt": s["attempt"], "end": epoch(s["at"])}
    if s["kind"] == "node.attempt":
        return {
            **item,
            "kind": "attempt",
            "start": epoch(s["started_at"]),
            "status": data.get("status", ""),
            "worker": s["worker"],
            "log": bool(data.get("log")),
        }
    if s["kind"] == "node.retry_scheduled":
        at = epoch(s["at"]) or 0.0
        return {**item, "kind": "backoff", "start": at, "end": at + float(data.get("delay_seconds") or 0)}
    return {**item, "kind": "reset", "start": epoch(s["at"]), "nodes": data.get("nodes") or [s["node_id"]]}


def render(ctx: dict[str, Any]) -> dict[str, str]:
    return {target: render_to_string(name, ctx) for target, name in FRAGMENTS.items()}


def node_detail(run: Run, node_id: str) -> dict[str, Any]:
    """A node of a run: its input (run input and upstream outputs), output, error, attempts."""
    from workflows.versions import load_graph

    node = NodeRun.objects.get(run=run, node_id=node_id)
    predecessors = load_graph(run.version_id).predecessors(node_id)
    upstream = dict(
        NodeRun.objects.filter(run=run, node_id__in=predecessors, status=NodeStatus.SUCCEEDED).values_list(
            "node_id", "output"
        )
    )
    attempts = RunEvent.objects.filter(run=run, node_id=node_id).order_by("id")
    return {"run": run, "node": node, "upstream": upstream, "attempts": attempts}
