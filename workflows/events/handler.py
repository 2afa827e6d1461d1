"""The `event.publish` node: a workflow publishes an event to a topic from one of its nodes.

The event is a CloudEvent whose `id` is `<run>:<node>` and `source` `/switchyard/runs/<run>`,
so a retried or replayed attempt publishes the same event again and, publishing being
idempotent on (source, id), starts nothing twice. Its `data` is the config's `data` with
`{input...}` and `{upstream...}` placeholders filled (never `{secret...}`: an event is kept
and shown). Its `syrun` extension names the run, which bounds chains of workflows started by
events that nodes publish (a workflow subscribed to the topic it publishes to would run for
ever): the run that would be the CHILD_DEPTH_LIMIT-th in such a chain fails instead, saying so.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from workflows.core.cloudevents import CloudEvent
from workflows.core.topics import TOPIC_PATTERN
from workflows.events import publishing
from workflows.handlers.builtin import render_template, render_value, template_sources
from workflows.handlers.registry import HandlerError, NodeContext, node
from workflows.store.models import Run
from workflows.store.topics import TopicEvent

PUBLISH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "topic": {
            "type": "string",
            "pattern": TOPIC_PATTERN,
            "description": "The topic, e.g. orders.shipped.",
        },
        "type": {
            "type": "string",
            "maxLength": 200,
            "description": "The CloudEvent type (default: the topic).",
        },
        "subject": {"type": "string", "maxLength": 500, "description": "May contain {input.key}."},
        "data": {
            "description": (
                "The event's data; strings may contain {input.key} and {upstream.node.key} "
                "(and, in a map node, {item.key} and {index})."
            )
        },
    },
    "required": ["topic"],
    "additionalProperties": False,
}


@node("event.publish", config_schema=PUBLISH_SCHEMA)
def publish_event(ctx: NodeContext) -> dict[str, Any]:
    """Publish an event to a topic: it starts a run of every workflow subscribed to it.

    Once per node of a run, however often the attempt is retried (the event's id is
    run:node). Returns the event's row, whether it was published before, and the runs it started.
    """
    where = "event.publish"
    check_chain(ctx.run_id, where)
    sources = template_sources(ctx)
    topic = str(ctx.config["topic"])
    event = CloudEvent(
        id=f"{ctx.run_id}:{ctx.node_id}",
        source=f"/switchyard/runs/{ctx.run_id}",
        type=str(ctx.config.get("type") or topic),
        subject=render_template(str(ctx.config.get("subject", "")), sources, f"{where} config.subject"),
        datacontenttype="application/json",
        data=render_value(ctx.config.get("data"), sources, f"{where} config.data"),
        extensions={"syrun": ctx.run_id},
    )
    (done,) = publishing.publish_events([(topic, event)], actor=f"run {ctx.run_id}")
    return {
        "topic": topic,
        "id": event.id,
        "event": done.row_id,
        "duplicate": done.duplicate,
        "runs": done.runs,
    }


def chain_depth(run_id: int, limit: int) -> int:
    """How many runs, this one included, lead here through events that nodes published (at most `limit`)."""
    depth = 0
    current: int | None = run_id
    while current is not None and depth < limit:
        depth += 1
        key = Run.objects.filter(pk=current).values_list("idempotency_key", flat=True).first() or ""
        if not key.startswith("event:"):
            break
        extensions = (
            TopicEvent.objects.filter(pk=int(key.split(":")[1])).values_list("extensions", flat=True).first()
        )
        parent = (extensions or {}).get("syrun")
        current = parent if isinstance(parent, int) else None
    return depth


def check_chain(run_id: int, where: str) -> None:
    limit = int(settings.SWITCHYARD["CHILD_DEPTH_LIMIT"])
    if chain_depth(run_id, limit) >= limit:
        raise HandlerError(
            f"{where}: this run is the {limit}th of a chain of runs started by events that nodes "
            f"published (CHILD_DEPTH_LIMIT={limit}); is a workflow subscribed to a topic it publishes to?"
        )
