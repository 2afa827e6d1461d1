"""Input contracts in Chromium: a schema'd demo started with `{}` is refused with a 422 naming
the field; a failure no retry can fix is dead after one attempt, said in a sentence; its
traceback is shown, collapsed, on the run page's node panel and on the dead-letter page."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect

from tests.integration.conftest import publish, wait_finished
from tests.integration.runtime import Runtime
from workflows.handlers.demo import DEMO_AGENT
from workflows.runs import actions as runs
from workflows.store.models import DeadLetter, NodeRun, Run, RunEvent

PageAs = Callable[[str], Page]
Screenshot = Callable[[Page, str], Path]
SENTENCE = "the run's input has no `order_id`; start the run with an input that has it"


def field(page: Page, path: str) -> Any:
    return page.locator(f'#sr-dialog [data-field="{path}"]')


def test_an_empty_start_of_a_schemad_demo_is_refused_with_a_422_naming_the_field(
    page_as: PageAs, live_url: str, screenshot: Screenshot
) -> None:
    publish("demo-agent", DEMO_AGENT)
    page = page_as("operator")
    page.goto(f"{live_url}/workflows/")
    page.click('[data-start-run="demo-agent"]')
    expect(page.locator("#sr-dialog")).to_have_attribute("data-state", "ready")
    expect(field(page, "input.order_id")).to_contain_text("A-1001")  # the typed form, described
    with page.expect_response(lambda r: r.url.endswith("/workflows/demo-agent/runs")) as answer:
        page.click("#sr-start")  # nothing filled in: the input is {}
    assert answer.value.status == 422
    errors = answer.value.json()["errors"]
    assert [(e["field"], e["code"]) for e in errors] == [("input.order_id", "required")]
    expect(field(page, "input.order_id").locator(".ed-field-issues")).to_have_text("is required")
    expect(page.locator("#sr-errors")).to_contain_text("input.order_id")
    screenshot(page, "empty-start-refused")
    assert Run.objects.count() == 0


def test_an_unfixable_error_is_dead_after_one_attempt_and_its_traceback_is_shown(
    runtime: Runtime, page_as: PageAs, live_url: str, screenshot: Screenshot
) -> None:
    # A version from before the demo declared its schema: the start is accepted, the node is not.
    untyped = {key: value for key, value in DEMO_AGENT.items() if key != "input_schema"}
    run, _ = runs.start_run(publish("old-agent", untyped), {})
    assert wait_finished(run).status == "failed"
    agent = NodeRun.objects.get(run=run, node_id="support_agent")
    assert (agent.status, agent.attempt) == ("dead", 1)
    assert not RunEvent.objects.filter(run=run, kind="node.retry_scheduled").exists()

    page = page_as("operator")
    page.goto(f"{live_url}/runs/{run.pk}/")
    page.locator('#run-nodes tr[data-node="support_agent"]').click()
    panel = page.locator("#node-detail")
    expect(panel.locator("[data-panel-node] .badge")).to_have_text("dead")
    expect(panel.locator("pre.error")).to_contain_text(SENTENCE)
    expect(panel.locator("[data-field=not-retryable]")).to_contain_text("Not retried")
    traceback = panel.locator("details[data-field=traceback]")
    expect(traceback.locator("pre")).to_be_hidden()  # collapsed until asked for
    traceback.locator("summary").click()
    expect(traceback.locator("pre")).to_contain_text("render_template")
    expect(traceback.locator("pre")).to_contain_text("HandlerError")
    screenshot(page, "node-panel-traceback")

    letter = DeadLetter.objects.get(run=run)
    page.goto(f"{live_url}/dead-letters/{letter.pk}/")
    expect(page.locator("pre.error")).to_contain_text(SENTENCE)
    expect(page.locator("[data-field=not-retryable]")).to_contain_text("replay with edited input")
    traceback = page.locator("details[data-field=traceback]")
    expect(traceback.locator("pre")).to_be_hidden()
    traceback.locator("summary").click()
    expect(traceback.locator("pre")).to_contain_text("chat_messages")
    screenshot(page, "dead-letter-traceback")
