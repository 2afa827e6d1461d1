"""Events that start runs: topics, subscriptions (filter, input mapping), CloudEvents in
structured, batch and binary mode, idempotency on (source, id), replay, retention."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from datetime import timedelta
from typing import Any

from django.db.models import Count
from django.test import override_settings
from django.utils import timezone

from tests.api.conftest import Api, assert_problem
from tests.integration.conftest import node, publish
from tests.integration.runtime import Runtime, wait_for
from workflows.core.cloudevents import BATCH_TYPE, STRUCTURED_TYPE
from workflows.events import archive, subscriptions
from workflows.events.handler import publish_event
from workflows.handlers.registry import NodeContext
from workflows.runs import actions as runs
from workflows.runtime import bus
from workflows.store.models import Run, RunTraceParent, Workflow
from workflows.store.topics import TopicEvent

ONE_NODE = {"nodes": [node("take", "core.echo")], "edges": []}


def cloud_event(n: int, **extra: Any) -> dict[str, Any]:
    return {
        "specversion": "1.0",
        "id": f"evt-{n}",
        "source": "/shop",
        "type": "orders.created",
        "data": {"order": n, "total": n * 10},
        **extra,
    }


def subscribed(slug: str, topic: str = "orders.created", definition: Any = None, **options: Any) -> Workflow:
    workflow = publish(slug, definition or ONE_NODE)
    subscriptions.subscribe(workflow, topic, **options)
    return workflow


def post_batch(api: Api, events: list[dict[str, Any]]) -> Any:
    return api.call("POST", "events", raw=json.dumps(events), content_type=BATCH_TYPE)


def test_a_thousand_events_start_two_thousand_runs_and_none_again_when_posted_again(
    api: Api, runtime: Runtime
) -> None:
    first, second = subscribed("billing"), subscribed("shipping")
    events = [cloud_event(n) for n in range(1000)]

    answer = post_batch(api, events)
    assert answer.status_code == 202, answer.content
    published = answer.json()["events"]
    assert [len(p["runs"]) for p in published] == [2] * 1000
    assert not any(p["duplicate"] for p in published)
    assert Run.objects.count() == 2000
    per_workflow = dict(Run.objects.values_list("workflow__slug").annotate(Count("id")))
    assert per_workflow == {"billing": 1000, "shipping": 1000}

    again = post_batch(api, events).json()["events"]
    assert all(p["duplicate"] for p in again)
    assert [p["runs"] for p in again] == [p["runs"] for p in published]
    assert Run.objects.count() == 2000 and TopicEvent.objects.count() == 1000

    run = Run.objects.get(
        workflow=first, idempotency_key=f"event:{published[7]['event']}:{first.topic_subscriptions.get().pk}"
    )
    assert run.input == {"order": 7, "total": 70}
    wait_for(lambda: not Run.objects.exclude(status="succeeded").exists(), 240, "the 2,000 runs to finish")
    assert second.runs.filter(status="succeeded").count() == 1000


def test_a_filter_admits_events_and_a_mapping_makes_the_input(api: Api) -> None:
    big = subscribed(
        "big-orders",
        filter_source="output.total > 100 and input.source == '/shop'",
        mapping={"order": "output.order", "kind": "input.type", "absent": "output.nothing"},
    )
    published = post_batch(api, [cloud_event(5), cloud_event(50)]).json()["events"]
    assert [len(p["runs"]) for p in published] == [0, 1]
    assert Run.objects.get(workflow=big).input == {"order": 50, "kind": "orders.created", "absent": None}
    kept = api.get(f"events/{published[0]['event']}").json()
    assert kept["deliveries"] == [
        {"subscription": big.topic_subscriptions.get().pk, "workflow": "big-orders", "outcome": "filtered"}
    ]


def test_structured_and_binary_events_start_runs_once_per_source_and_id(api: Api) -> None:
    workflow = subscribed("orders")
    one = api.call("POST", "events", raw=json.dumps(cloud_event(1)), content_type=STRUCTURED_TYPE)
    assert one.status_code == 202 and len(one.json()["runs"]) == 1
    headers = {
        "ce-specversion": "1.0",
        "ce-id": "bin-1",
        "ce-source": "/shop",
        "ce-type": "orders.created",
        "ce-subject": "o-9",
    }
    binary = api.call("POST", "events", raw=json.dumps({"order": 9}), headers=headers)
    assert binary.status_code == 202, binary.content
    assert binary.json()["duplicate"] is False and len(binary.json()["runs"]) == 1
    repeated = api.call("POST", "events", raw=json.dumps({"order": 9}), headers=headers)
    assert repeated.json()["duplicate"] is True and repeated.json()["runs"] == binary.json()["runs"]
    other_source = api.call("POST", "events", raw="{}", headers={**headers, "ce-source": "/other"})
    assert other_source.json()["duplicate"] is False
    assert workflow.runs.count() == 3
    assert Run.objects.get(pk=binary.json()["runs"][0]).input == {"order": 9}
    row = TopicEvent.objects.get(event_id="bin-1", source="/shop")
    assert row.subject == "o-9" and row.datacontenttype == "application/json"


def test_the_topic_comes_from_the_query_then_the_extension_then_the_type(api: Api) -> None:
    subscribed("a", topic="alpha")
    subscribed("b", topic="beta")
    api.call("POST", "events?topic=alpha", raw=json.dumps(cloud_event(1)), content_type=STRUCTURED_TYPE)
    api.call("POST", "events", raw=json.dumps(cloud_event(2, topic="beta")), content_type=STRUCTURED_TYPE)
    api.call("POST", "events", raw=json.dumps(cloud_event(3)), content_type=STRUCTURED_TYPE)
    topics = dict(TopicEvent.objects.values_list("event_id", "topic__name"))
    assert topics == {"evt-1": "alpha", "evt-2": "beta", "evt-3": "orders.created"}


def test_events_missing_required_attributes_are_refused_naming_them(api: Api) -> None:
    body = assert_problem(
        api.call(
            "POST",
            "events",
            raw=json.dumps({"specversion": "1.0", "type": "x"}),
            content_type=STRUCTURED_TYPE,
        ),
        400,
        "id",
        "source",
    )
    assert "id, source" in body["detail"]
    batch = assert_problem(
        post_batch(api, [cloud_event(1), {"specversion": "1.0", "id": "2", "source": "/s"}]), 400, "[1].type"
    )
    assert batch["detail"].startswith("[1]:")
    headers = {"ce-specversion": "1.0", "ce-id": "b", "ce-source": "/s"}
    binary = assert_problem(api.call("POST", "events", raw="{}", headers=headers), 400, "type")
    assert "ce-type" in binary["detail"]
    assert_problem(
        api.call(
            "POST", "events", raw=json.dumps(cloud_event(1, specversion="0.3")), content_type=STRUCTURED_TYPE
        ),
        400,
    )
    assert not TopicEvent.objects.exists()


def test_an_event_the_workflow_schema_refuses_is_recorded_and_spares_the_others(api: Api) -> None:
    strict = {
        **ONE_NODE,
        "input_schema": {"type": "object", "properties": {"total": {"type": "integer", "maximum": 100}}},
    }
    subscribed("strict", definition=strict)
    published = post_batch(api, [cloud_event(5), cloud_event(50)]).json()["events"]
    assert [len(p["runs"]) for p in published] == [1, 0]
    (refused,) = TopicEvent.objects.get(event_id="evt-50").deliveries
    assert refused["outcome"] == "refused" and "total" in refused["error"]


def test_a_kept_event_is_searchable_and_replays_to_a_subscription(api: Api) -> None:
    workflow = subscribed("orders")
    post_batch(api, [cloud_event(1), cloud_event(2, type="orders.cancelled", topic="orders.created")])
    found = api.get("events", type="orders.cancelled").json()["items"]
    assert [e["event_id"] for e in found] == ["evt-2"]
    assert [e["event_id"] for e in api.get("events", q="evt-1").json()["items"]] == ["evt-1"]
    sub = workflow.topic_subscriptions.get()
    replayed = api.post(f"events/{found[0]['id']}/replay", {"subscription": sub.pk})
    assert replayed.status_code == 201, replayed.content
    assert workflow.runs.count() == 3
    assert api.get(f"events/{found[0]['id']}").json()["deliveries"][-1]["outcome"] == "replayed"
    assert_problem(api.post(f"events/{found[0]['id']}/replay", {"subscription": 999999}), 404)


def test_the_key_form_still_wakes_waiting_nodes(api: Api) -> None:
    answer = api.post("events", {"key": "order-1", "payload": {"ok": True}})
    assert answer.status_code == 202 and answer.json()["retained"] is True
    assert_problem(api.post("events", {"payload": {}}), 422, "key")


def test_subscriptions_over_the_api_check_filter_and_mapping(api: Api) -> None:
    publish("orders", ONE_NODE)
    made = api.put(
        "workflows/orders/topics/orders.created",
        {"filter": "output.total > 1", "input_mapping": {"n": "output.order"}},
    )
    assert made.status_code == 200, made.content
    listed = api.get("workflows/orders/topics")
    assert listed.status_code == 200, listed.content
    assert listed.json()[0]["filter"] == "output.total > 1"
    bad = assert_problem(
        api.put(
            "workflows/orders/topics/orders.created",
            {"filter": "output.x(", "input_mapping": {"n": "__import__"}},
        ),
        422,
    )
    assert [e["path"] for e in bad["errors"]] == ["filter", "input_mapping.n"]
    assert api.get("topics").json() == [{"name": "orders.created", "subscriptions": 1, "events": 0}]
    assert api.delete("workflows/orders/topics/orders.created").status_code == 204
    assert_problem(api.delete("workflows/orders/topics/orders.created"), 404)


def test_events_past_the_retention_age_are_deleted(api: Api) -> None:
    post_batch(api, [cloud_event(1), cloud_event(2)])
    TopicEvent.objects.filter(event_id="evt-1").update(received_at=timezone.now() - timedelta(days=31))
    with override_settings(
        SWITCHYARD={**__import__("django.conf").conf.settings.SWITCHYARD, "RETENTION_DAYS": 30.0}
    ):
        assert archive.prune_events() == 1
    assert list(TopicEvent.objects.values_list("event_id", flat=True)) == ["evt-2"]


def test_runs_an_event_starts_continue_its_trace(api: Api) -> None:
    subscribed("orders")
    caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    api.call(
        "POST",
        "events",
        raw=json.dumps(cloud_event(1)),
        content_type=STRUCTURED_TYPE,
        headers={"traceparent": caller},
    )
    api.call(
        "POST",
        "events",
        raw=json.dumps(cloud_event(2, traceparent=own)),
        content_type=STRUCTURED_TYPE,
        headers={"traceparent": caller},
    )
    traces = dict(RunTraceParent.objects.values_list("run__input__order", "trace_id"))
    assert traces == {1: "4bf92f3577b34da6a3ce929d0e0e4736", 2: "0af7651916cd43dd8448eb211c80319c"}


def publisher(slug: str, topic: str, **config: Any) -> Workflow:
    definition = {
        "nodes": [node("announce", "event.publish", config={"topic": topic, **config})],
        "edges": [],
    }
    return publish(slug, definition)


def test_a_node_publishes_an_event_that_starts_the_subscribed_workflows(api: Api) -> None:
    listener = subscribed("ship", topic="orders.paid")
    workflow = publisher("pay", "orders.paid", data={"order": "{input.order}", "note": "paid {input.order}"})
    run, _ = runs.start_run(workflow, {"order": 7})
    ctx = NodeContext(
        run.pk,
        "announce",
        1,
        f"{run.pk}:announce:1",
        {"order": 7},
        {},
        workflow.active_version.definition["nodes"][0]["config"],
        time.monotonic() + 30,
    )
    first = publish_event(ctx)
    retried = publish_event(replace(ctx, attempt=2, idempotency_key=f"{run.pk}:announce:2"))
    assert first["duplicate"] is False and retried["duplicate"] is True
    assert retried["runs"] == first["runs"] and len(first["runs"]) == 1
    assert Run.objects.get(workflow=listener).input == {"order": 7, "note": "paid 7"}
    kept = TopicEvent.objects.get()
    assert (kept.event_id, kept.source) == (f"{run.pk}:announce", f"/switchyard/runs/{run.pk}")


def test_a_workflow_that_feeds_itself_stops_at_the_depth_limit(
    transactional_db: Any, redis_clean: None
) -> None:
    loop = publisher("echo-chamber", "loop.topic", data={"n": 1})
    subscriptions.subscribe(loop, "loop.topic")
    bus.ensure_group()
    rt = Runtime(SWITCHYARD_CHILD_DEPTH_LIMIT="3")
    rt.worker("loop-worker")
    rt.scheduler("loop-scheduler")
    try:
        runs.start_run(loop, {})
        failed = wait_for(lambda: Run.objects.filter(status="failed").first(), 60, "the third run to fail")
    finally:
        rt.stop()
    assert Run.objects.count() == 3
    assert "CHILD_DEPTH_LIMIT=3" in failed.nodes.get().error


def test_a_signed_hook_publishes_into_its_topic_once_per_delivery(
    api: Api, api_as: Any, runtime: Runtime
) -> None:
    from tests.api.test_webhooks import signed

    billing, shipping = subscribed("billing", "crm.deal_won"), subscribed("shipping", "crm.deal_won")
    assert_problem(api_as("operator").post("topics/crm.deal_won/hooks", {"name": "crm"}), 403)
    made = api.post("topics/crm.deal_won/hooks", {"name": "crm", "event_type": "com.crm.deal.won"})
    assert made.status_code == 201, made.content
    hook = made.json()
    assert hook["topic"] == "crm.deal_won" and hook["secret"].startswith("whsec_")
    listed = api.get("topics/crm.deal_won/hooks").json()["items"]
    assert [h["id"] for h in listed] == [hook["id"]] and "secret" not in listed[0]

    raw = json.dumps({"deal": 7, "amount": 1200}).encode()
    url = f"topic-hooks/{hook['id']}"
    first = Api(None).call("POST", url, raw=raw, headers=signed(hook["secret"], raw, "deal-7"))
    assert first.status_code == 202, first.content
    answer = first.json()
    assert (answer["topic"], answer["id"], answer["duplicate"]) == ("crm.deal_won", "deal-7", False)
    assert len(answer["runs"]) == 2
    again = Api(None).call("POST", url, raw=raw, headers=signed(hook["secret"], raw, "deal-7"))
    assert again.status_code == 202 and again.json()["duplicate"]
    assert again.json()["runs"] == answer["runs"]  # the runs the event started the first time
    kept = TopicEvent.objects.get(event_id="deal-7")
    assert (kept.type, kept.source, kept.data) == (
        "com.crm.deal.won",
        f"/topic-hooks/{hook['id']}",
        {"deal": 7, "amount": 1200},
    )
    for workflow in (billing, shipping):
        (run,) = Run.objects.filter(workflow=workflow)
        assert run.input == {"deal": 7, "amount": 1200}  # no input mapping: the event's data

    forged = Api(None).call("POST", url, raw=raw, headers=signed("whsec_wrong", raw, "deal-8"))
    assert_problem(forged, 401)
    assert "topic hook's secret" in forged.json()["detail"]
    assert_problem(
        Api(None).call(
            "POST", "topic-hooks/2f1d6c1e-4d1b-4c5e-9a57-0f0e1c2b3a4d", raw=raw, headers=signed("x", raw)
        ),
        404,
    )
    assert api.delete(url).status_code == 204
    assert_problem(Api(None).call("POST", url, raw=raw, headers=signed(hook["secret"], raw, "deal-9")), 404)
    assert Run.objects.count() == 2
