"""Child runs and sagas in Chromium: parent and child linked both ways on the run pages, the
compensation steps on the run page, and the editor's child-workflow picker and compensate field."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect

from tests.browser.editor_fixtures import open_editor, select_node
from tests.factories import make_workflow
from tests.integration.conftest import node, publish, wait_finished
from tests.integration.runtime import Runtime
from tests.integration.test_sagas import ended
from workflows.handlers.demo import DEMO_SAGA
from workflows.runs import actions as runs
from workflows.store.models import ChildRun, DeadLetter, Workflow, WorkflowVersion

PageAs = Callable[[str], Page]
Screenshot = Callable[[Page, str], Path]


def test_parent_and_child_runs_link_both_ways_and_the_child_shows_its_compensation(
    runtime: Runtime, page_as: PageAs, live_url: str, screenshot: Screenshot
) -> None:
    publish("demo-order-saga", DEMO_SAGA)
    shop = publish("shop", {"nodes": [node("order", "workflow.run", config={"workflow": "demo-order-saga"})]})
    run, _ = runs.start_run(shop, {"order_id": "A-9", "card": "declined"})
    assert wait_finished(run).status == "failed"
    child = ChildRun.objects.get(parent_run=run).child

    page = page_as("viewer")
    page.goto(f"{live_url}/runs/{run.pk}/")
    row = page.locator('#run-family tr[data-relation="child"]')
    expect(row).to_contain_text("demo-order-saga")
    expect(row).to_contain_text("order")
    expect(row.locator(".badge")).to_have_text("compensated")
    expect(page.locator('#run-nodes tr[data-node="order"] .error-cell')).to_contain_text(
        "failed (then compensated)"
    )
    screenshot(page, "parent")

    row.locator(f'a[href="/runs/{child.pk}/"]').click()
    page.wait_for_url(f"{live_url}/runs/{child.pk}/")
    expect(page.locator("[data-run-status]")).to_have_text("compensated")
    parent = page.locator('#run-family tr[data-relation="parent"]')
    expect(parent).to_contain_text("shop")
    expect(parent.locator(f'a[href="/runs/{run.pk}/"]')).to_have_text(f"#{run.pk}")
    step = page.locator('#run-compensation tr[data-step="reserve_inventory~compensate"]')
    expect(step).to_contain_text("reserve_inventory")
    expect(step.locator('[data-field="status"]')).to_have_text("succeeded")
    step.click()
    expect(page.locator("#node-detail")).to_contain_text("released")
    # The trace: the compensation is a row of its own, whose queue wait (if any) starts when
    # it was queued, after the step that failed, never at the run's start.
    undo = "reserve_inventory~compensate"
    expect(page.locator(f'#run-timeline [data-node-label="{undo}"]')).to_have_count(1)
    segments = page.locator(f'#run-timeline rect[data-node="{undo}"]').evaluate_all(
        "rs => rs.map(r => ({kind: r.dataset.segment, start: +r.dataset.start}))"
    )
    failed = page.locator('#run-timeline rect[data-segment="attempt"].failed').evaluate_all(
        "rs => rs.map(r => +r.dataset.end)"
    )
    assert [s["kind"] for s in segments if s["kind"] == "attempt"] == ["attempt"] and failed
    assert all(s["start"] >= max(failed) - 0.002 for s in segments)
    screenshot(page, "child-compensated")


def test_the_editor_picks_a_child_workflow_and_a_compensate_handler_with_inline_validation(
    page_as: PageAs, live_url: str, screenshot: Screenshot
) -> None:
    make_workflow("enrich")
    make_workflow("held")
    Workflow.objects.filter(slug="held").update(paused=True)
    make_workflow(
        "triage",
        {
            "nodes": [
                {"id": "call", "handler": "workflow.run", "config": {"workflow": "enrich"}},
                {"id": "book", "handler": "core.echo"},
            ]
        },
        publish=False,
    )
    page = page_as("editor")
    open_editor(page, live_url, "triage")
    select_node(page, "call")
    picker = page.locator('select[data-picker="workflow"]')
    expect(picker).to_have_value("enrich")
    expect(picker.locator("option")).to_have_text(
        ["(choose a workflow)", "enrich — Enrich", "held — Held (paused)"]
    )
    picker.select_option("held")
    issue = page.locator('#ed-inspect .ed-field[data-field="config.workflow"] .ed-field-issues')
    expect(issue).to_contain_text("workflow 'held' is paused")
    screenshot(page, "paused-child-refused")
    picker.select_option("enrich")
    expect(page.locator("#ed-problems")).to_have_attribute("data-count", "0")

    select_node(page, "book")
    undo = page.locator('select[data-picker="compensate"]')
    options = undo.locator("option").all_text_contents()
    assert "core.echo" in options and "workflow.run" not in options and "wait.timer" not in options
    undo.select_option("core.delay")
    expect(page.locator("#ed-inspect fieldset.ed-compensate > .ed-field-issues")).to_contain_text(
        "'seconds' is a required property"
    )
    page.locator("fieldset.ed-compensate").get_by_label("seconds").fill("1")
    expect(page.locator("#ed-problems")).to_have_attribute("data-count", "0")
    screenshot(page, "compensate-chosen")
    page.click('[data-cmd="save"]')
    expect(page.locator("#ed-status")).to_contain_text("Saved")
    saved = WorkflowVersion.objects.filter(workflow__slug="triage").order_by("-number", "-revision").first()
    assert saved is not None
    nodes: dict[str, Any] = {n["id"]: n for n in saved.definition["nodes"]}
    assert nodes["call"]["config"] == {"workflow": "enrich"}
    assert nodes["book"]["compensate"]["handler"] == "core.delay"
    assert nodes["book"]["compensate"]["config"] == {"seconds": 1}


def test_a_failure_the_saga_undid_shows_as_a_compensated_letter_not_an_open_one(
    runtime: Runtime, page_as: PageAs, live_url: str, screenshot: Screenshot
) -> None:
    run, _ = runs.start_run(publish("demo-order-saga", DEMO_SAGA), {"order_id": "A-12", "card": "declined"})
    assert ended(run).status == "compensated"
    letter = DeadLetter.objects.get(run=run)
    page = page_as("operator")
    page.goto(f"{live_url}/runs/{run.pk}/")
    chip = page.locator(f'.letters [data-letter="{letter.pk}"]')
    expect(chip).to_contain_text("charge_payment · compensated")
    expect(chip).to_have_attribute("title", re.compile("reserve_inventory~compensate"))
    page.goto(f"{live_url}/dead-letters/?view=list")
    expect(page.locator("body")).not_to_contain_text("charge_payment")  # not among the open ones
    page.goto(f"{live_url}/dead-letters/?view=list&status=compensated")
    expect(page.locator(f'a[href="/dead-letters/{letter.pk}/"]').first).to_be_visible()
    page.goto(f"{live_url}/dead-letters/{letter.pk}/")
    expect(page.locator("[data-letter-status]")).to_have_text("compensated")
    expect(page.locator("main")).to_contain_text("undid its work by reserve_inventory~compensate")
    expect(page.locator("main")).to_contain_text("by system")
    screenshot(page, "letter-compensated")
