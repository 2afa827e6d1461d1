"""A map node's items as people read them: progress per node, and items page by page.

Read-only; the pages and the API call these (the runtime writes items: runtime/mapping.py).
Progress is counted from the items' statuses: `done` succeeded, `failed` dead (or
cancelled), `running` queued, running or just failed (awaiting its retry decision),
`pending` not started yet or waiting for a retry's backoff.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Count, QuerySet

from workflows.core.states import NodeStatus as N
from workflows.store.errors import NotFound
from workflows.store.models import MapItem, NodeRun

BUCKETS = {
    "done": (N.SUCCEEDED,),
    "failed": (N.DEAD, N.CANCELLED),
    "running": (N.QUEUED, N.RUNNING, N.FAILED),
    "pending": (N.PENDING, N.RETRYING),
}
BUCKET_OF = {status: bucket for bucket, statuses in BUCKETS.items() for status in statuses}


def progress(noderun_ids: Iterable[int]) -> dict[int, dict[str, int]]:
    """Map node row id -> {total, done, failed, running, pending}; only nodes that have items."""
    counts: dict[int, dict[str, int]] = {}
    rows = (
        MapItem.objects.filter(node_run_id__in=list(noderun_ids))
        .values_list("node_run_id", "status")
        .annotate(n=Count("id"))
        .order_by()
    )
    for noderun_id, status, n in rows:
        c = counts.setdefault(noderun_id, dict.fromkeys(("total", *BUCKETS), 0))
        c["total"] += n
        c[BUCKET_OF[status]] += n
    return counts


def get_map_node(run_id: int, node_id: str) -> NodeRun:
    try:
        return NodeRun.objects.get(run_id=run_id, node_id=node_id)
    except NodeRun.DoesNotExist:
        raise NotFound(f"Run {run_id} has no node {node_id!r}.") from None


def items_of(node: NodeRun, bucket: str | None = None) -> QuerySet[MapItem]:
    """The node's items in their order, or those of one progress bucket."""
    items = MapItem.objects.filter(node_run=node)
    if bucket is not None:
        items = items.filter(status__in=BUCKETS[bucket])
    return items.order_by("index")
