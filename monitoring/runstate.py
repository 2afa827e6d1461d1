"""One run as the run page shows it: header, node table, DAG states and trace spans.

The page's first load and the websocket consumer both build it here, and both render its
fragments with the same templates.
"""

from __future__ import annotations

from typing import Any

from django.template.loader import render_to_string

from controlplane import access
from workflows import mapitems
from workflows.core.states import NodeStatus, RunStatus
from workflows.models import DeadLetter, NodeRun, Run, RunEvent, Wait

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
    attach_progress(nodes)
    spans = list(
        RunEvent.objects.filter(run=run, kind="node.attempt", id__gt=after_span)
        .order_by("id")
        .values("id", "node_id", "attempt", "started_at", "at", "worker", "data")
    )
    letters = list(DeadLetter.objects.filter(run=run).order_by("-id").values("id", "node_id", "status"))
    return {
        "run": run,
        "nodes": nodes,
        "letters": letters,
        "spans": spans,
        "can_cancel": access.can(user, "cancel_run") and run.status in (RunStatus.RUNNING, RunStatus.WAITING),
        "finished": run.status not in (RunStatus.RUNNING, RunStatus.WAITING),
    }


def attach_waits(run: Run, nodes: list[NodeRun]) -> None:
    """Give each waiting node its open Wait as `n.wait`: what it waits for, since, due when."""
    if not any(n.status == NodeStatus.WAITING for n in nodes):
        return
    open_waits = {w.node_run_id: w for w in Wait.objects.filter(run=run, closed_at__isnull=True)}
    for n in nodes:
        n.wait = open_waits.get(n.pk)  # type: ignore[attr-defined]


def attach_progress(nodes: list[NodeRun]) -> None:
    """Give each map node its items' progress as `n.progress` (None for other nodes)."""
    progress = mapitems.progress(n.pk for n in nodes)
    for n in nodes:
        n.progress = progress.get(n.pk)  # type: ignore[attr-defined]


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
                "items": getattr(n, "progress", None),
            }
            for n in ctx["nodes"]
        },
        "spans": [
            {
                "id": s["id"],
                "node": s["node_id"],
                "attempt": s["attempt"],
                "start": epoch(s["started_at"]),
                "end": epoch(s["at"]),
                "status": (s["data"] or {}).get("status", ""),
                "worker": s["worker"],
            }
            for s in ctx["spans"]
        ],
    }


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
    items = mapitems.progress([node.pk]).get(node.pk)
    return {"run": run, "node": node, "upstream": upstream, "attempts": attempts, "items": items}


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
