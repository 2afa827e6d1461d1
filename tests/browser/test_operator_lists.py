"""The operator's lists in Chromium: runs that wait shown as waiting with what they wait for,
bulk bars that tick nothing and say their count, a replay's message that stays true, search
on the workflow and key lists, and a favicon."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect

from tests.api.conftest import dead_letter
from tests.integration.conftest import node, publish, wait_finished
from tests.integration.runtime import Runtime, wait_for
from workflows.handlers.demo import DEMO_REFUND
from workflows.integrations import keys
from workflows.runs import actions as runs
from workflows.store.models import DeadLetter, Wait

PageAs = Callable[[str], Page]
Screenshot = Callable[[Page, str], Path]
CHAIN = {"nodes": [node("first"), node("second")], "edges": [{"source": "first", "target": "second"}]}


def test_a_run_waiting_for_a_person_is_listed_and_counted_as_waiting_with_what_it_waits_for(
    runtime: Runtime, page_as: PageAs, live_url: str, screenshot: Screenshot
) -> None:
    refund = publish("demo-refund", DEMO_REFUND)
    run, _ = runs.start_run(refund, {"order_id": "A-7", "amount": 25})
    done, _ = runs.start_run(publish("chain", CHAIN), {})
    wait_for(lambda: Wait.objects.filter(run=run, closed_at=None).exists(), 30, "the approval to wait")
    wait_finished(done)

    page = page_as("viewer")
    page.goto(f"{live_url}/runs/?status=waiting")
    rows = page.locator("tr[data-run]")
    expect(rows).to_have_count(1)
    expect(rows.locator("[data-field=status]")).to_have_text("waiting")
    expect(rows.locator("[data-field=waiting-for]")).to_have_text("for a decision at approve_refund")
    screenshot(page, "runs-waiting")
    page.goto(f"{live_url}/runs/?status=running")
    expect(page.locator("[data-empty]")).to_be_visible()

    page.goto(f"{live_url}/")
    row = page.locator('tr[data-workflow="demo-refund"]').first
    expect(row.locator("[data-field=running]")).to_contain_text("+1 waiting")
    screenshot(page, "overview-waiting")


def test_bulk_bars_tick_nothing_and_say_how_many_they_act_on(
    page_as: PageAs, live_url: str, screenshot: Screenshot
) -> None:
    workflow = publish("chain", CHAIN)
    letters = [dead_letter(workflow, "first", {"n": n}) for n in range(3)]
    page = page_as("operator")
    page.goto(f"{live_url}/dead-letters/")  # the groups: every open letter of them
    expect(page.locator("input[type=checkbox]:checked")).to_have_count(0)
    expect(page.locator("[data-action=replay]")).to_have_text("Replay all 3…")
    expect(page.locator("[data-action=discard]")).to_have_text("Discard all 3…")
    screenshot(page, "groups-bulk")

    page.goto(f"{live_url}/dead-letters/?view=list")
    expect(page.locator("input[type=checkbox]:checked")).to_have_count(0)
    replay = page.locator("[data-action=replay]")
    expect(replay).to_have_text("Replay 0 selected…")
    first, second = (DeadLetter.objects.get(run=r).pk for r in letters[:2])
    page.check(f'input[name=ids][value="{first}"]')
    page.check(f'input[name=ids][value="{second}"]')
    expect(replay).to_have_text("Replay 2 selected…")
    page.check("[data-field=all-matching]")
    expect(replay).to_have_text("Replay all 3 matching…")
    expect(page.locator("[data-action=discard]")).to_have_text("Discard all 3 matching…")
    screenshot(page, "list-bulk")
    page.uncheck("[data-field=all-matching]")
    expect(replay).to_have_text("Replay 2 selected…")

    page.goto(f"{live_url}/runs/")
    cancel = page.locator("[data-action=cancel-selected]")
    expect(cancel).to_have_text("Cancel 0 selected")
    expect(page.locator("input[type=checkbox]:checked")).to_have_count(0)
    page.locator("input[name=ids]").first.check()
    expect(cancel).to_have_text("Cancel 1 selected")


def test_a_replays_message_says_what_was_done_not_that_the_run_still_runs(
    runtime: Runtime, page_as: PageAs, live_url: str, screenshot: Screenshot
) -> None:
    flaky = node("flaky", "core.flaky", config={"succeed_on_attempt": 2}, retry={"max_attempts": 1})
    run, _ = runs.start_run(publish("flaky", {"nodes": [flaky]}), {})
    assert wait_finished(run).status == "failed"
    letter = DeadLetter.objects.get(run=run)
    page = page_as("operator")
    page.goto(f"{live_url}/dead-letters/{letter.pk}/")
    page.click("[data-action=replay]")
    message = page.locator(".message.success")
    expect(message).to_have_text(
        f"Dead letter {letter.pk} replayed: run {run.pk} took its node up again; the outcome below follows it."
    )
    expect(page.locator("#replay-outcome [data-field=replay-status]")).to_have_text("succeeded")
    assert wait_finished(run).status == "succeeded"
    expect(message).not_to_contain_text("running")
    screenshot(page, "replayed")


def test_the_workflow_and_key_lists_are_searched(
    page_as: PageAs, live_url: str, users: Any, screenshot: Screenshot
) -> None:
    publish("billing-sync", CHAIN)
    publish("refund-review", CHAIN)
    page = page_as("admin")
    page.goto(f"{live_url}/workflows/")
    page.fill("#workflow-search [data-field=q]", "refund")
    page.press("#workflow-search [data-field=q]", "Enter")
    expect(page.locator("tbody tr")).to_have_count(1)
    expect(page.locator("tbody")).to_contain_text("refund-review")
    assert "q=refund" in page.url
    screenshot(page, "workflow-search")
    page.goto(f"{live_url}/workflows/?q=nothing-like-it")
    expect(page.locator("[data-empty]")).to_have_text("No workflow matches “nothing-like-it”.")

    owner = users["operator"]
    keys.create_key(owner, "ci deploys", ["read"])
    keys.create_key(owner, "nightly export", ["read"])
    page.goto(f"{live_url}/keys/")
    page.fill("#key-search [data-field=q]", "nightly")
    page.press("#key-search [data-field=q]", "Enter")
    expect(page.locator("tr[data-key]")).to_have_count(1)
    expect(page.locator("tr[data-key]")).to_contain_text("nightly export")
    screenshot(page, "key-search")


def test_pages_name_a_favicon_and_favicon_ico_is_served(page_as: PageAs, live_url: str) -> None:
    page = page_as("viewer")
    page.goto(f"{live_url}/runs/")
    href = page.locator("link[rel=icon]").get_attribute("href")
    assert href is not None
    icon = page.request.get(f"{live_url}{href}")
    assert (icon.status, icon.headers["content-type"]) == (200, "image/svg+xml")
    legacy = page.request.get(f"{live_url}/favicon.ico")
    assert legacy.status == 200 and legacy.url.endswith(href), "the old name leads to the same icon"
