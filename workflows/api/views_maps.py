"""Map nodes: a map node's progress and its items, page by page (up to 10,000 of them)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from django.http import HttpRequest
from ninja import Path, Query, Router
from pydantic import Field
from typing_extensions import TypedDict

from workflows.api import inputs as i
from workflows.api.auth import allowed
from workflows.api.pagination import paginate
from workflows.api.parsing import MAX_ID
from workflows.api.schema import refuses
from workflows.api.serializers import millis
from workflows.core.definition import NODE_ID_PATTERN
from workflows.runs import actions as runs, mapitems
from workflows.store.models import MapItem

router = Router(tags=["runs"])
RunId = Annotated[int, Path(ge=1, le=MAX_ID)]
NodeId = Annotated[str, Path(pattern=NODE_ID_PATTERN, max_length=64)]


class ItemQuery(i.Page):
    status: Literal["done", "failed", "running", "pending"] | None = Field(
        None, description="Only the items in this part of the progress."
    )


class Progress(TypedDict):
    total: int
    done: int
    failed: int
    running: int
    pending: int


class ItemOut(TypedDict):
    index: int
    status: str
    attempt: int
    item: Any
    output: Any
    error: str
    worker: str
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: float | None


class ItemPage(TypedDict):
    node_id: str
    status: str
    progress: Progress
    items: list[ItemOut]
    next_cursor: str | None


def item(m: MapItem) -> ItemOut:
    return {
        "index": m.index,
        "status": m.status,
        "attempt": m.attempt,
        "item": m.item,
        "output": m.output,
        "error": m.error,
        "worker": m.worker,
        "started_at": m.started_at,
        "finished_at": m.finished_at,
        "duration_ms": millis(m.started_at, m.finished_at),
    }


EMPTY = {"total": 0, "done": 0, "failed": 0, "running": 0, "pending": 0}


@router.get(
    "/runs/{id:run_id}/nodes/{node_id}/items",
    response=ItemPage,
    auth=allowed("view"),
    summary="List a map node's items",
)
@refuses(404)
def list_map_items(request: HttpRequest, run_id: RunId, node_id: NodeId, q: Query[ItemQuery]) -> Any:
    """A map node's progress (done / failed / running / pending of total) and its items in
    their order, each with its attempts, output or error; filter by `status`. A node that is
    not a map (or has not started) has no items."""
    runs.get_run(run_id)
    node = mapitems.get_map_node(run_id, node_id)
    page = paginate(mapitems.items_of(node, q.status), q, "id", item, descending=False)
    counts = mapitems.progress([node.pk]).get(node.pk, EMPTY)
    return {"node_id": node.node_id, "status": node.status, "progress": counts, **page}
