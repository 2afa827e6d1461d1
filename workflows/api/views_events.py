"""Events: post one on a key; it wakes the wait.event nodes waiting on it, or is kept for them."""

from __future__ import annotations

from typing import Any

from ninja import Router, Status

from workflows.api import inputs as i
from workflows.api import serializers as s
from workflows.api.auth import ApiRequest, allowed
from workflows.waits import waiting as waits

router = Router(tags=["events"])


@router.post("/events", response={202: s.PostedEventOut}, auth=allowed("post_event"), summary="Post an event")
def post_event(request: ApiRequest, body: i.EventIn) -> Any:
    """Post an event: every node waiting on its key wakes with the payload as its output (only the
    oldest of `first_only` ones). Nobody waiting: it is kept for the retention time, still a 202."""
    posted = waits.post_event(body.key, body.payload, body.source, actor=request.auth)
    data = {
        "id": posted.event_id,
        "key": posted.key,
        "woken_runs": posted.woken_runs,
        "retained": posted.retained,
    }
    return Status(202, data)
