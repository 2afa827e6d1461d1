"""The inbox in a real browser: approvals arrive live, are decided alone or in bulk."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page, expect

from tests.browser.test_dashboard import assert_not_reloaded, mark_page
from tests.integration.conftest import publish
from tests.integration.runtime import Runtime, wait_for
from workflows.handlers.demo import DEMO_REFUND
from workflows.runs import actions as runs
from workflows.store.models import NodeRun, Wait, Workflow


def refund_workflow() -> Workflow:
    return publish("demo-refund", DEMO_REFUND)


def start_waiting(workflow: Workflow, amount: int, order: str) -> Wait:
    """Start a refund run and wait (with a deadline) until its approval waits."""
    run, _ = runs.start_run(workflow, {"amount": amount, "order_id": order})
    return wait_for(lambda: Wait.objects.filter(run=run).first(), 30, f"run {run.pk} to wait for approval")


def row(page: Page, wait: Wait) -> Any:
    return page.locator(f'#inbox-list tr[data-approval="{wait.pk}"]')


def node_output(wait: Wait) -> Any:
    return NodeRun.objects.get(pk=wait.node_run_id).output


def test_an_approval_arrives_live_and_is_edited_then_approved_from_the_detail_pane(
    runtime: Runtime, page_as: Any, live_url: str, screenshot: Any
) -> None:
    workflow = refund_workflow()
    page = page_as("operator")
    page.goto(f"{live_url}/inbox/")
    expect(page.locator("#live-status")).to_have_text("live")
    expect(page.locator("[data-empty]")).to_be_visible()
    expect(page.locator("[data-inbox-count]")).to_have_count(0)
    mark_page(page)

    wait = start_waiting(workflow, 25, "A-7")
    expect(row(page, wait)).to_be_visible()
    expect(page.locator("#nav-inbox [data-inbox-count]")).to_have_text("1")
    screenshot(page, "inbox-list")

    row(page, wait).locator("a.approval-title").click()
    pane = page.locator("#inbox-detail")
    expect(pane.locator("h2")).to_have_text("Approve this refund?")
    expect(pane.locator('pre[data-context="upstream:draft"]').first).to_contain_text("A-7")
    proposed = pane.locator("[data-proposed]")
    edited = proposed.input_value().replace("25", "20")
    proposed.fill(edited)
    pane.locator('textarea[name="field.reason"]').fill("Partial refund: one item kept.")
    pane.locator('textarea[name="comment"]').fill("checked with the warehouse")
    screenshot(page, "inbox-detail")
    pane.locator("[data-action=approve]").click()
    expect(pane.locator("[data-done]")).to_contain_text("Approved")
    expect(row(page, wait)).to_have_count(0)
    expect(page.locator("[data-inbox-count]")).to_have_count(0)
    assert_not_reloaded(page)

    output = node_output(wait)
    assert output["approved"] is True and output["data"]["amount"] == 20
    assert output["edited"]["amount"] == {"from": 25, "to": 20}  # the note says 20 EUR now too
    assert output["fields"] == {"reason": "Partial refund: one item kept."}
    wait_for(
        lambda: NodeRun.objects.filter(run_id=wait.run_id, node_id="pay_refund", status="succeeded").exists(),
        30,
        "the approved refund to be paid",
    )


def test_a_refused_decision_is_shown_inline_naming_the_field(
    runtime: Runtime, page_as: Any, live_url: str, screenshot: Any
) -> None:
    wait = start_waiting(refund_workflow(), 30, "B-2")
    page = page_as("operator")
    page.goto(f"{live_url}/inbox/{wait.pk}/")
    pane = page.locator("#inbox-detail")
    pane.locator('textarea[name="field.reason"]').fill("x" * 501)
    pane.locator("[data-action=approve]").click()
    expect(pane.locator('[data-refusal="422"]')).to_contain_text("do not fit the form")
    expect(pane.locator('[data-field-error="reason"]')).to_contain_text("is too long")
    screenshot(page, "inbox-refused")
    assert Wait.objects.get(pk=wait.pk).closed_at is None


def test_bulk_approve_decides_the_selected_with_one_comment(
    runtime: Runtime, page_as: Any, live_url: str, screenshot: Any
) -> None:
    workflow = refund_workflow()
    first, second, kept = (start_waiting(workflow, n, f"C-{n}") for n in (11, 12, 13))
    Wait.objects.filter(pk=first.pk).update(due_at=first.created_at)  # shown overdue
    page = page_as("operator")
    page.goto(f"{live_url}/inbox/")
    expect(row(page, first)).to_have_class("overdue")
    expect(row(page, first).locator("[data-field=due]")).to_contain_text("overdue")
    expect(page.locator("#nav-inbox [data-inbox-count]")).to_have_text("3")
    screenshot(page, "inbox-overdue")
    row(page, first).locator('input[name="ids"]').check()
    row(page, second).locator('input[name="ids"]').check()
    expect(page.locator("[data-selected-count]")).to_have_text("2 selected")
    expect(page.locator("[data-action=approve-selected]")).to_have_text("Approve 2 selected")
    expect(page.locator("[data-action=reject-selected]")).to_have_text("Reject 2 selected")
    page.fill('#bulk-form input[name="comment"]', "batch of small refunds")
    screenshot(page, "inbox-bulk")
    page.click("[data-action=approve-selected]")
    expect(page.locator(".message.success")).to_have_text("Approved 2 approvals.")
    expect(row(page, first)).to_have_count(0)
    expect(row(page, second)).to_have_count(0)
    expect(row(page, kept)).to_be_visible()
    for wait in (first, second):
        output = node_output(wait)
        assert output["approved"] is True and output["comment"] == "batch of small refunds"
    assert Wait.objects.get(pk=kept.pk).closed_at is None


def test_a_viewer_without_rights_sees_nothing_to_decide_and_no_count(
    runtime: Runtime, page_as: Any, live_url: str
) -> None:
    wait = start_waiting(refund_workflow(), 40, "D-1")
    page = page_as("viewer")
    page.goto(f"{live_url}/inbox/")
    expect(page.locator("[data-empty]")).to_contain_text("Nothing waiting for you to decide")
    expect(row(page, wait)).to_have_count(0)
    expect(page.locator("[data-inbox-count]")).to_have_count(0)
    page.goto(f"{live_url}/inbox/{wait.pk}/")
    expect(page.locator('[data-refusal="403"]')).to_contain_text("may not decide")
    expect(page.locator("[data-decision-form]")).to_have_count(0)
    assert Wait.objects.get(pk=wait.pk).closed_at is None
