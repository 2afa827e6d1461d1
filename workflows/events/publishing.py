"""Publish events to topics: keep each once, start one run per admitting subscription, in bulk.

`publish_events` takes (topic, event) pairs, such as a CloudEvents batch. Per topic, one
statement inserts the events that are new (`ON CONFLICT (topic, source, id) DO NOTHING
RETURNING`): an event posted again, or by two requests at once, is new to exactly one of
them, and only that one starts runs. Then, per subscribed workflow, every event its filter
admits becomes one item of `runs.start_runs` (one INSERT for up to 1,000 runs), with the
idempotency key `event:<event row>:<subscription>` as a second guard; items whose input the
workflow's schema refuses are left out and recorded as refused with the reason, so one bad
event never holds back the others. What each event set off is written back to it
(`deliveries`) in one statement. All of it is one transaction: an event is kept with its runs,
or not at all.

`replay` re-delivers a kept event to one subscription: a new run (no idempotency key: a
replay is asked for on purpose), its filter not consulted, recorded on the event and audited.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction

from workflows.core import topics as core
from workflows.core.cloudevents import CloudEvent
from workflows.events.subscriptions import ensure_topic, get_subscription
from workflows.runs import actions as runs, tracecontext
from workflows.runs.actions import MAX_BATCH, StartItem
from workflows.store import audit
from workflows.store.errors import DomainError, NotFound
from workflows.store.graphs import load_graph
from workflows.store.topics import Topic, TopicEvent, TopicSubscription

EVENTS = TopicEvent._meta.db_table

INSERT_SQL = f"""
INSERT INTO {EVENTS} (topic_id, event_id, source, type, subject, time, datacontenttype, data,
                      extensions, received_at, deliveries)
SELECT %(topic)s, e.id, e.source, e.type, e.subject, e.time, e.dct, e.data::jsonb, e.ext::jsonb,
       now(), '[]'::jsonb
FROM unnest(%(ids)s::text[], %(sources)s::text[], %(types)s::text[], %(subjects)s::text[],
            %(times)s::timestamptz[], %(dcts)s::text[], %(datas)s::text[], %(exts)s::text[])
     AS e(id, source, type, subject, time, dct, data, ext)
ON CONFLICT (topic_id, source, event_id) DO NOTHING
RETURNING id, source, event_id
"""

DELIVERIES_SQL = f"""
UPDATE {EVENTS} t SET deliveries = t.deliveries || v.d::jsonb
FROM unnest(%(ids)s::bigint[], %(deliveries)s::text[]) AS v(id, d)
WHERE t.id = v.id
"""


@dataclass
class Published:
    """What posting one event did: its row, whether it was already kept, the runs it started."""

    topic: str
    event: CloudEvent
    traceparent: str | None = None  # the W3C trace context its runs continue (tracecontext.py)
    row_id: int = 0
    duplicate: bool = False
    deliveries: list[dict[str, Any]] = field(default_factory=list)

    @property
    def runs(self) -> list[int]:
        return [d["run"] for d in self.deliveries if d.get("run")]


def publish_events(
    pairs: Sequence[tuple[str, CloudEvent]], actor: Any = None, traceparent: str | None = None
) -> list[Published]:
    """Publish each (topic, event); return what each did, in order.

    The runs an event starts continue the trace of its `traceparent` extension attribute
    (CloudEvents' distributed tracing extension), else of `traceparent` (the request's).
    """
    results = [
        Published(topic, event, str(event.extensions.get("traceparent") or traceparent or "") or None)
        for topic, event in pairs
    ]
    by_topic: dict[str, list[Published]] = defaultdict(list)
    for result in results:
        by_topic[result.topic].append(result)
    with transaction.atomic():
        for name, group in by_topic.items():
            publish_to(ensure_topic(name), group)
    return results


def publish_to(topic: Topic, group: list[Published]) -> None:
    fresh = insert_events(topic, group)
    for result in group:
        result.duplicate = result.row_id == 0
    known = [r for r in group if r.duplicate]
    if known:
        kept_rows(topic, known)
    new = [r for r in group if not r.duplicate]
    subs = TopicSubscription.objects.filter(topic=topic, enabled=True)
    for sub in subs.select_related("workflow", "workflow__active_version"):  # start_runs reads the version
        deliver(sub, new)
    write_deliveries(fresh, {r.row_id: r.deliveries for r in new})


def insert_events(topic: Topic, group: list[Published]) -> list[int]:
    """Insert the events not kept yet; set their row ids; return those ids."""
    events = [r.event for r in group]
    params: dict[str, Any] = {
        "topic": topic.pk,
        "ids": [e.id for e in events],
        "sources": [e.source for e in events],
        "types": [e.type for e in events],
        "subjects": [e.subject for e in events],
        "times": [e.time for e in events],
        "dcts": [e.datacontenttype for e in events],
        "datas": [json.dumps(e.data) for e in events],
        "exts": [json.dumps(dict(e.extensions)) for e in events],
    }
    with connection.cursor() as cur:
        cur.execute(INSERT_SQL, params)
        inserted = {(source, event_id): row_id for row_id, source, event_id in cur.fetchall()}
    for result in group:  # the first of two equal events in one batch takes the row
        row_id = inserted.pop((result.event.source, result.event.id), 0)
        result.row_id = row_id
    return [r.row_id for r in group if r.row_id]


def kept_rows(topic: Topic, known: list[Published]) -> None:
    """Fill in the row and deliveries of events kept before (their second posting)."""
    rows = TopicEvent.objects.filter(topic=topic, event_id__in={r.event.id for r in known})
    found = {(row.source, row.event_id): row for row in rows.only("id", "source", "event_id", "deliveries")}
    for result in known:
        row = found.get((result.event.source, result.event.id))
        if row is not None:
            result.row_id, result.deliveries = row.id, list(row.deliveries)


def deliver(sub: TopicSubscription, results: list[Published]) -> None:
    """Start the subscribed workflow's runs for the events its filter admits, in bulk."""
    admitted = []
    for result in results:
        event = result.event.as_condition_input()
        if core.admits(sub.filter, event):
            admitted.append((result, core.run_input(sub.input_mapping, event)))
        else:
            result.deliveries.append(delivery(sub, "filtered"))
    by_trace: dict[str | None, list[tuple[Published, Any]]] = defaultdict(list)
    for result, run_input in admitted:  # one trace context per bulk start
        by_trace[result.traceparent].append((result, run_input))
    for traceparent, group in by_trace.items():
        for start in range(0, len(group), MAX_BATCH):
            start_batch(sub, group[start : start + MAX_BATCH], traceparent)


def start_batch(sub: TopicSubscription, batch: list[tuple[Published, Any]], traceparent: str | None) -> None:
    workflow = sub.workflow
    items = [StartItem(run_input, f"event:{result.row_id}:{sub.pk}") for result, run_input in batch]
    if workflow.active_version_id is None:
        for result, _ in batch:
            result.deliveries.append(delivery(sub, "refused", error="the workflow has no active version"))
        return
    _, _, issues = runs.check_items(workflow, load_graph(workflow.active_version_id).input_schema, items)
    bad: dict[int, str] = {}
    for issue in issues:
        index = int(issue.path.split("]", 1)[0].removeprefix("items["))
        bad.setdefault(index, f"{issue.path.split('.', 1)[-1]}: {issue.message}")
    good = [n for n in range(len(batch)) if n not in bad]
    for n, message in bad.items():
        batch[n][0].deliveries.append(delivery(sub, "refused", error=message))
    if not good:
        return
    try:
        started = tracecontext.start_runs(workflow, [items[n] for n in good], traceparent)
    except DomainError as exc:
        for n in good:
            batch[n][0].deliveries.append(delivery(sub, "refused", error=exc.message))
        return
    for n, (run, _) in zip(good, started, strict=True):
        batch[n][0].deliveries.append(delivery(sub, "started", run=run.pk))


def delivery(sub: TopicSubscription, outcome: str, run: int | None = None, error: str = "") -> dict[str, Any]:
    found: dict[str, Any] = {"subscription": sub.pk, "workflow": sub.workflow.slug, "outcome": outcome}
    if run is not None:
        found["run"] = run
    if error:
        found["error"] = error
    return found


def write_deliveries(ids: Iterable[int], deliveries: dict[int, list[dict[str, Any]]]) -> None:
    ids = [i for i in ids if deliveries.get(i)]
    if not ids:
        return
    with connection.cursor() as cur:
        cur.execute(DELIVERIES_SQL, {"ids": ids, "deliveries": [json.dumps(deliveries[i]) for i in ids]})


def as_cloud_event(row: TopicEvent) -> CloudEvent:
    return CloudEvent(
        id=row.event_id,
        source=row.source,
        type=row.type,
        subject=row.subject,
        time=row.time,
        datacontenttype=row.datacontenttype,
        data=row.data,
        extensions=row.extensions or {},
    )


def replay(event_id: int, subscription_id: int, actor: Any = None) -> int:
    """Deliver a kept event to one subscription again: start a new run; return its id."""
    row = TopicEvent.objects.select_related("topic").filter(pk=event_id).first()
    if row is None:
        raise NotFound(f"There is no event {event_id}.")
    sub = get_subscription(subscription_id)
    if sub.topic_id != row.topic_id:
        raise NotFound(f"Subscription {subscription_id} is not on topic {row.topic.name!r}.")
    event = as_cloud_event(row).as_condition_input()
    with transaction.atomic():
        run, _ = runs.start_run(sub.workflow, core.run_input(sub.input_mapping, event))
        done = delivery(sub, "replayed", run=run.pk) | {"by": audit.actor_label(actor)}
        write_deliveries([row.pk], {row.pk: [done]})
        audit.record(actor, "event.replayed", row, subscription=sub.pk, run=run.pk)
    return run.pk
