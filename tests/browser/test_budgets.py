"""The budgets page in a real browser: an admin adds a budget (a bad amount is refused by
name), runs stop at it and show as held, a viewer sees the figures and the held runs but no
controls, an admin allows one held call once and raises the budget for the rest."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.fakes.llm_server import FakeLLMServer
from tests.integration.conftest import publish, wait_finished
from tests.integration.runtime import Runtime, wait_for
from workflows.core import budgets as core
from workflows.runs import actions as runs
from workflows.store.models import BudgetHold, LLMProvider, NodeRun

PROMPT = "Summarise order {input.order}."
MAX_TOKENS = 20
USED = 13


def answer(request: Any) -> dict[str, Any]:
    return {
        "model": "tiny-1",
        "choices": [{"message": {"role": "assistant", "content": "summary"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3},
    }


@pytest.fixture
def fake(transactional_db: None) -> Iterator[FakeLLMServer]:
    with FakeLLMServer(reply=answer) as server:
        LLMProvider.objects.create(
            name="fakeco", base_url=server.base_url, default_model="tiny-1", is_default=True
        )
        yield server


def worst_case() -> int:
    return (
        core.prompt_bound([{"role": "user", "content": PROMPT.replace("{input.order}", "7")}], None)
        + MAX_TOKENS
    )


def fill_budget(page: Page, amount: str) -> None:
    form = page.locator("#budget-form form")
    form.locator("input[name=name]").fill("orders daily")
    form.locator("select[name=unit]").select_option("tokens")
    form.locator("input[name=amount]").fill(amount)
    form.locator("select[name=window]").select_option("day")
    form.locator("select[name=scope]").select_option("workflow")
    form.locator("select[name=workflow]").select_option("orders")
    form.locator("select[name=policy]").select_option("ask")
    form.locator("button[type=submit]").click()


def test_runs_held_by_a_budget_show_on_its_page_and_an_admin_lets_them_go(
    runtime: Runtime, fake: FakeLLMServer, page_as: Any, live_url: str, screenshot: Any
) -> None:
    config = {"prompt": PROMPT, "max_tokens": MAX_TOKENS}
    workflow = publish(
        "orders", {"nodes": [{"id": "summarise", "handler": "llm.chat", "config": config}], "edges": []}
    )
    admin = page_as("admin")
    admin.goto(f"{live_url}/budgets/")
    fill_budget(admin, "-5")
    expect(admin.locator("#budget-error")).to_contain_text("amount")
    expect(admin.locator("input[name=amount]")).to_have_attribute("aria-invalid", "true")
    screenshot(admin, "refused")

    fill_budget(admin, str(USED + worst_case()))  # room for two calls
    row = admin.locator('[data-budget="orders daily"]')
    expect(row).to_contain_text("workflow orders")
    started = [runs.start_run(workflow, {"order": 7})[0] for _ in range(4)]
    wait_for(lambda: BudgetHold.objects.filter(closed_at__isnull=True).count() == 2, 60, "two runs held")
    wait_for(
        lambda: NodeRun.objects.filter(run__workflow=workflow, status="succeeded").count() == 2,
        60,
        "two done",
    )
    assert len(fake.requests) == 2

    viewer = page_as("viewer")
    viewer.goto(f"{live_url}/budgets/")
    vrow = viewer.locator('[data-budget="orders daily"]')
    expect(vrow.locator(".budget-spent")).to_have_text(str(2 * USED))
    expect(vrow.locator(".budget-held")).to_have_text("2")
    held = viewer.locator("[data-hold]")
    expect(held).to_have_count(2)
    expect(held.first).to_contain_text("over the budget")
    expect(viewer.locator("text=Allow once")).to_have_count(0)
    expect(viewer.locator("#budget-form")).to_have_count(0)
    chart = viewer.locator('#burn figure[data-burn="orders daily"]')
    expect(chart).to_contain_text(f"{2 * USED} of {USED + worst_case()} tokens this day")
    steps = chart.locator(".burn-spent").get_attribute("points")
    assert steps is not None and len(steps.split(" ")) == 2 + 2 * 2  # start, a step per settled call, now
    screenshot(viewer, "held-as-viewer")
    held_run = BudgetHold.objects.filter(closed_at__isnull=True).values_list("run_id", flat=True).first()
    viewer.goto(f"{live_url}/runs/{held_run}/")
    expect(viewer.locator('[data-field="wait"]')).to_contain_text(
        "held by a spend budget: Budget orders daily"
    )
    screenshot(viewer, "held-run")

    viewer.goto(f"{live_url}/inbox/")
    expect(viewer.locator("#inbox-budget-holds")).to_have_count(0)
    admin.goto(f"{live_url}/inbox/")  # the budget asks: its held calls are in an admin's inbox
    expect(admin.locator("#inbox-budget-holds [data-hold]")).to_have_count(2)
    screenshot(admin, "inbox")
    admin.locator("#inbox-budget-holds [data-hold] button", has_text="Allow once").first.click()
    expect(admin.locator(".messages")).to_contain_text("over the budget, once")
    expect(admin.locator("#inbox-budget-holds [data-hold]")).to_have_count(1)
    wait_for(lambda: len(fake.requests) == 3, 60, "the allowed call")
    admin.goto(f"{live_url}/budgets/")
    admin.locator('[data-budget="orders daily"] a', has_text="Edit").click()
    admin.locator("#budget-form input[name=amount]").fill("10000")
    admin.locator("#budget-form button[type=submit]").click()
    for run in started:
        assert wait_finished(run, 60).status == "succeeded"
    assert len(fake.requests) == 4
    admin.goto(f"{live_url}/budgets/")
    expect(admin.locator('[data-budget="orders daily"] .budget-held')).to_have_text("0")
    screenshot(admin, "all-done")
