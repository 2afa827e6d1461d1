"""The operator dashboard in a real browser, against Daphne, workers, scheduler, broadcaster."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import Page, expect

from tests.integration.conftest import node, publish, wait_finished
from tests.integration.runtime import Runtime
from workflows.runs import actions as runs
from workflows.store.models import DeadLetter, NodeRun, Run, Workflow


def mark_page(page: Page) -> None:
    """Leave a marker in the page's JS state: it survives only if the page never reloads."""
    page.evaluate("window.__noReload = true")


def assert_not_reloaded(page: Page) -> None:
    assert page.evaluate("window.__noReload === true"), "the page was reloaded"


def cell(page: Page, slug: str, field: str) -> Any:
    return page.locator(f'tr[data-workflow="{slug}"] [data-field="{field}"]')


def slow_chain() -> Workflow:
    return publish(
        "live-chain",
        {
            "nodes": [
                node("first", "core.delay", config={"seconds": 1.0}),
                # Long enough for the run page to open while it runs, even on a busy machine.
                node("second", "core.delay", config={"seconds": 5.0}),
                node("last"),
            ],
            "edges": [{"source": "first", "target": "second"}, {"source": "second", "target": "last"}],
        },
    )


def test_run_nodes_change_state_live_and_overview_counts_move(
    runtime: Runtime, page_as: Any, live_url: str, screenshot: Any
) -> None:
    workflow = slow_chain()
    overview = page_as("viewer")
    expect(overview.locator("#live-status")).to_have_text("live")
    expect(cell(overview, "live-chain", "running")).to_have_text("0")
    mark_page(overview)

    run, _ = runs.start_run(workflow, {})
    expect(cell(overview, "live-chain", "running")).to_have_text("1")
    expect(cell(overview, "live-chain", "nodes_running")).to_have_text("1")
    screenshot(overview, "overview-run-in-flight")

    page = overview.context.new_page()
    page.goto(f"{live_url}/runs/{run.pk}/")
    mark_page(page)
    graph = page.locator("#run-graph")
    expect(graph.locator('[data-node="second"]')).to_have_attribute("data-status", "running")
    expect(graph.locator('[data-node="first"]')).to_have_attribute("data-status", "succeeded")
    expect(page.locator('#run-nodes tr[data-node="second"] [data-field="status"]')).to_have_text("running")
    expect(page.locator("#run-timeline rect.tl-bar.running")).to_have_count(1)
    screenshot(page, "run-in-flight")
    expect(page.locator("[data-run-status]")).to_have_text("succeeded")
    expect(graph.locator('[data-node="last"]')).to_have_attribute("data-status", "succeeded")
    expect(page.locator("#run-timeline rect.tl-bar.succeeded")).to_have_count(3)
    expect(page.locator("[data-action=cancel]")).to_have_count(0)
    screenshot(page, "run-succeeded")
    assert_not_reloaded(page)

    expect(cell(overview, "live-chain", "running")).to_have_text("0")
    expect(cell(overview, "live-chain", "succeeded_1m")).to_have_text("1")
    expect(overview.locator("[data-kpi=runs_in_flight]")).to_have_text("0")
    screenshot(overview, "overview-after")
    assert_not_reloaded(overview)
    assert Run.objects.get(pk=run.pk).status == "succeeded"


def test_operator_cancels_a_running_run_from_its_page(runtime: Runtime, page_as: Any, live_url: str) -> None:
    run, _ = runs.start_run(slow_chain(), {})
    page = page_as("operator")
    page.goto(f"{live_url}/runs/{run.pk}/")
    expect(page.locator('#run-graph [data-node="first"]')).to_have_attribute(
        "data-status", re.compile("queued|running")
    )
    page.fill("#run-cancel input[name=reason]", "drill")
    page.click("[data-action=cancel]")
    expect(page.locator(".message.success")).to_contain_text(f"Run {run.pk} cancelled")
    expect(page.locator("[data-run-status]")).to_have_text("cancelled")
    expect(page.locator("[data-audit='run.cancel']")).to_contain_text("operator")
    assert wait_finished(run).status == "cancelled"


def test_dead_letter_appears_live_then_replay_from_its_page_finishes_the_run(
    runtime: Runtime, page_as: Any, live_url: str, screenshot: Any
) -> None:
    workflow = publish(
        "flaky-drill",
        {
            "nodes": [
                node("prepare", "core.echo"),
                node(
                    "flaky",
                    "core.flaky",
                    config={"succeed_on_attempt": 3},
                    retry={"max_attempts": 2, "backoff_seconds": 0.1},
                ),
            ],
            "edges": [{"source": "prepare", "target": "flaky"}],
        },
    )
    page = page_as("operator")
    page.goto(f"{live_url}/dead-letters/?view=list")
    expect(page.locator("#live-status")).to_have_text("live")
    expect(page.locator("tr[data-letter]")).to_have_count(0)
    mark_page(page)

    run, _ = runs.start_run(workflow, {"order": 7})
    row = page.locator("tr[data-letter]")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("flaky")
    assert_not_reloaded(page)
    screenshot(page, "dead-letter-arrived")

    row.locator("a").first.click()
    expect(page.locator("h1")).to_contain_text("Dead letter")
    expect(page.locator("pre.code.error")).to_contain_text("attempt 2 fails on purpose")
    expect(page.locator("pre.code", has_text='"order": 7').first).to_be_visible()
    screenshot(page, "dead-letter-page")
    page.click("[data-action=replay]")
    expect(page.locator(".message.success")).to_contain_text("replayed")
    expect(page.locator("[data-letter-status]")).to_have_text("replayed")
    expect(page.locator("[data-audit='deadletter.replay']")).to_contain_text("operator")

    page.goto(f"{live_url}/runs/{run.pk}/")
    expect(page.locator("[data-run-status]")).to_have_text("succeeded")
    screenshot(page, "run-after-replay")
    flaky = NodeRun.objects.get(run=run, node_id="flaky")
    assert (flaky.status, flaky.attempt, flaky.output) == ("succeeded", 3, {"attempt": 3})
    assert DeadLetter.objects.get(run=run).status == "replayed"


def test_viewer_sees_no_replay_button_and_the_server_refuses_the_replay(
    page_as: Any, live_url: str, screenshot: Any
) -> None:
    run, _ = runs.start_run(publish("viewer-drill", {"nodes": [node("boom", "core.fail")]}), {})
    dead = NodeRun.objects.get(run=run, node_id="boom")
    letter = DeadLetter.objects.create(run=run, node_run=dead, node_id="boom", attempt=1, error="drill")
    page = page_as("viewer")
    page.goto(f"{live_url}/dead-letters/?view=list")
    expect(page.locator(f'tr[data-letter="{letter.pk}"]')).to_be_visible()
    expect(page.locator("input[name=ids], [data-action]")).to_have_count(0)
    page.goto(f"{live_url}/dead-letters/{letter.pk}/")
    expect(page.locator("h1")).to_contain_text(f"Dead letter #{letter.pk}")
    expect(page.locator("[data-action=replay], [data-action=discard]")).to_have_count(0)
    screenshot(page, "viewer-dead-letter")

    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    for path, form in [
        (f"/dead-letters/{letter.pk}/replay/", {}),
        (f"/dead-letters/{letter.pk}/discard/", {"reason": "no"}),
        ("/dead-letters/bulk/", {"action": "replay", "ids": str(letter.pk)}),
    ]:
        response = page.request.post(f"{live_url}{path}", form=form, headers={"X-CSRFToken": token})
        assert response.status == 403, path
    letter.refresh_from_db()
    assert letter.status == "open"


def test_a_run_with_bad_input_carries_on_after_a_replay_with_edited_input_from_the_page(
    runtime: Runtime, page_as: Any, live_url: str, screenshot: Any
) -> None:
    schema = {"type": "object", "properties": {"user_id": {"type": "string"}}, "required": ["user_id"]}
    workflow = publish(
        "checked-input",
        {
            "nodes": [
                node("check", "core.validate", config={"schema": schema}, retry={"max_attempts": 1}),
                node("after", "core.echo"),
            ],
            "edges": [{"source": "check", "target": "after"}],
        },
    )
    run, _ = runs.start_run(workflow, {"user": 7})
    assert wait_finished(run).status == "failed"
    letter = DeadLetter.objects.get(run=run)
    page = page_as("operator")
    page.goto(f"{live_url}/dead-letters/{letter.pk}/")
    expect(page.locator("pre.code.error")).to_contain_text("'user_id' is a required property")

    page.get_by_text("Replay with edited input").click()
    page.fill("#replay-input", '{"user_id": "u-7"}')
    screenshot(page, "dead-letter-edited-input")
    page.click("[data-action=replay-edited]")

    expect(page.locator(".message.success")).to_contain_text("with edited input")
    page.goto(f"{live_url}/runs/{run.pk}/")
    expect(page.locator("[data-run-status]")).to_have_text("succeeded")
    assert NodeRun.objects.get(run=run, node_id="after").output["upstream"] == {"check": {"user_id": "u-7"}}
