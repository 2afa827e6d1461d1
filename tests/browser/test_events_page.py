"""The events pages in a real browser: a workflow subscribed to a topic from its page, events
published over the API listed and searched, one replayed to its subscription by an operator."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from tests.integration.conftest import node, publish
from workflows.core.cloudevents import from_structured
from workflows.events import publishing
from workflows.store.models import Run
from workflows.store.topics import TopicEvent, TopicHook


def test_an_editor_subscribes_a_workflow_and_events_show_with_their_runs(
    page_as: Any, live_url: str, screenshot: Any
) -> None:
    workflow = publish("fulfil", {"nodes": [node("take", "core.echo")], "edges": []})
    page = page_as("editor")
    page.goto(f"{live_url}/workflows/fulfil/topics/")
    page.fill("input[name=topic]", "orders.created")
    page.fill("input[name=filter]", "output.total > 100")
    page.fill("textarea[name=input_mapping]", '{"order": "output.id"}')
    page.click("#subscribe-form button[type=submit]")
    row = page.locator("#subscription-orders\\.created")
    expect(row).to_contain_text("output.total > 100")
    expect(row).to_contain_text('{"order": "output.id"}')
    screenshot(page, "topics")

    events = [
        {
            "specversion": "1.0",
            "id": f"o-{n}",
            "source": "/shop",
            "type": "orders.created",
            "data": {"id": n, "total": n},
        }
        for n in (50, 150, 250)
    ]
    publishing.publish_events([("orders.created", from_structured(e)) for e in events])
    assert sorted(r.input["order"] for r in Run.objects.filter(workflow=workflow)) == [150, 250]

    page.goto(f"{live_url}/events/")
    rows = page.locator("#events-list tbody tr")
    expect(rows).to_have_count(3)
    expect(page.locator("#event-" + str(TopicEvent.objects.get(event_id="o-150").pk))).to_contain_text(
        "fulfil #"
    )
    expect(page.locator("#event-" + str(TopicEvent.objects.get(event_id="o-50").pk))).to_contain_text(
        "fulfil: filtered"
    )
    page.fill("input[name=q]", "o-2")
    page.click("#events-filters button[type=submit]")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("o-250")
    screenshot(page, "events")

    page.goto(f"{live_url}/workflows/fulfil/live/")
    expect(page.locator("#workflow-topics")).to_contain_text("orders.created")
    assert page.locator("#replay-form").count() == 0


def test_an_operator_replays_an_event_that_the_filter_held_back(
    page_as: Any, live_url: str, screenshot: Any
) -> None:
    workflow = publish("fulfil", {"nodes": [node("take", "core.echo")], "edges": []})
    from workflows.events import subscriptions

    subscriptions.subscribe(workflow, "orders.created", "output.total > 100")
    event = {
        "specversion": "1.0",
        "id": "o-1",
        "source": "/shop",
        "type": "orders.created",
        "data": {"total": 1, "note": "<b>bold</b>"},
    }
    publishing.publish_events([("orders.created", from_structured(event))])
    assert not Run.objects.exists()
    row = TopicEvent.objects.get()
    page = page_as("operator")
    page.goto(f"{live_url}/events/{row.pk}/")
    expect(page.locator("#event-data")).to_contain_text('"note": "<b>bold</b>"')  # shown as text, escaped
    page.click("#replay-form button")
    expect(page.locator("#event-deliveries")).to_contain_text("replayed by")
    screenshot(page, "replayed")
    assert Run.objects.get().input == {"total": 1, "note": "<b>bold</b>"}


def test_an_admin_adds_a_signed_hook_into_a_topic_and_sees_its_secret_once(
    page_as: Any, live_url: str, screenshot: Any
) -> None:
    admin = page_as("admin")
    admin.goto(f"{live_url}/events/")
    form = admin.locator("#hook-form")
    form.locator("input[name=topic]").fill("bad topic!")
    form.locator("input[name=name]").fill("crm")
    form.locator("button[type=submit]").click()
    expect(admin.locator("#hook-error")).to_contain_text("topic")

    form = admin.locator("#hook-form")
    form.locator("input[name=topic]").fill("crm.deal_won")
    form.locator("input[name=name]").fill("crm")
    form.locator("button[type=submit]").click()
    secret = admin.locator("#hook-secret")
    expect(secret).to_have_value(TopicHook.objects.get(name="crm").secret)
    row = admin.locator('[data-hook="crm"]')
    expect(row).to_contain_text("crm.deal_won")
    expect(row).to_contain_text(f"/api/v1/topic-hooks/{TopicHook.objects.get(name='crm').pk}")
    screenshot(admin, "hook-made")

    admin.goto(f"{live_url}/events/")
    expect(admin.locator("#hook-secret")).to_have_count(0)  # shown that once
    viewer = page_as("viewer")
    viewer.goto(f"{live_url}/events/")
    expect(viewer.locator('[data-hook="crm"]')).to_be_visible()
    expect(viewer.locator("#hook-form")).to_have_count(0)
    expect(viewer.locator('[data-hook="crm"] button')).to_have_count(0)

    admin.locator('[data-hook="crm"] button', has_text="Delete").click()
    expect(admin.locator(".messages")).to_contain_text("deleted")
    expect(admin.locator('[data-hook="crm"]')).to_have_count(0)
    assert not TopicHook.objects.exists()
