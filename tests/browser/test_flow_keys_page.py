"""Per-key figures in a real browser, for a viewer: a workflow's live page (in flight, waiting
and the limit per concurrency key, updated as places free) and the overview's busiest keys."""

from __future__ import annotations

import shutil

import pytest
from playwright.sync_api import Page, expect

from tests.integration.conftest import node, publish
from workflows.runs import actions as runs
from workflows.runtime import advancing
from workflows.store.models import NodeRun

pytestmark = pytest.mark.usefixtures("lone_starts")


def row(page: Page, key: str):  # noqa: ANN201 - a Playwright locator
    return page.locator(f"#flow-key-table tr[data-key='{key}']")


def test_the_live_page_shows_in_flight_and_waiting_per_key_and_follows_freed_places(
    page_as, live_url: str, screenshot
) -> None:
    workflow = publish(
        "per-customer",
        {"nodes": [node("call", concurrency={"key": "input.customer", "limit": 2})]},
    )
    big = [runs.start_run(workflow, {"customer": "acme"})[0] for _ in range(5)]
    small = runs.start_run(workflow, {"customer": "globex"})[0]
    advancing.advance_runs([run.pk for run in [*big, small]])  # no worker: they stay queued

    page = page_as("viewer")
    page.goto(f"{live_url}/workflows/per-customer/live/")
    expect(row(page, "acme").locator("[data-in-flight]")).to_have_text("2")
    expect(row(page, "acme").locator("[data-waiting]")).to_have_text("3")
    expect(row(page, "globex").locator("[data-in-flight]")).to_have_text("1")
    expect(row(page, "globex").locator("[data-waiting]")).to_have_text("0")
    for width in (1280, 800):
        page.set_viewport_size({"width": width, "height": 900})
        shutil.copy(screenshot(page, f"keys-{width}"), f"/tmp/flow-keys-{width}.png")

    queued = NodeRun.objects.filter(run__in=big, status="queued").values_list("pk", flat=True)
    NodeRun.objects.filter(pk__in=list(queued)).update(status="succeeded")
    advancing.enqueue_due(workers=1)
    expect(row(page, "acme").locator("[data-in-flight]")).to_have_text("2")  # the next two took them
    expect(row(page, "acme").locator("[data-waiting]")).to_have_text("1")

    page.goto(f"{live_url}/")  # the overview: the busiest keys over every workflow
    busiest = page.locator("#busiest-key-table tr[data-key='acme']")
    expect(busiest.locator("[data-in-flight]")).to_have_text("2")
    expect(busiest.locator("[data-waiting]")).to_have_text("1")
    for width in (1280, 800):
        page.set_viewport_size({"width": width, "height": 900})
        shutil.copy(screenshot(page, f"overview-{width}"), f"/tmp/flow-overview-{width}.png")
