"""The provider health page in a real browser: an operator forces a breaker open, the runs
that would call it show as held behind it (not failed), the operator closes it and they
finish; a viewer sees the breaker and its held runs but no controls."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.fakes.llm_server import FakeLLMServer
from tests.integration.conftest import publish, wait_finished
from tests.integration.runtime import Runtime
from workflows.runs import actions as runs
from workflows.store.models import AuditEntry, BreakerDecision, LLMProvider, NodeRun

ROW = '[data-breaker="fakeco/tiny-1"]'


@pytest.fixture
def fake(transactional_db: None) -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        LLMProvider.objects.create(
            name="fakeco", base_url=server.base_url, default_model="tiny-1", is_default=True
        )
        yield server


def widths(page: Page, name: str) -> None:
    """Screenshots at 1280 and 800 px wide, for a person to look at (/tmp)."""
    for width in (1280, 800):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(Path("/tmp") / f"provider-health-{name}-{width}.png"), full_page=True)
    page.set_viewport_size({"width": 1400, "height": 1000})


def test_an_operator_forces_a_breaker_open_holds_runs_behind_it_and_closes_it(
    runtime: Runtime, fake: FakeLLMServer, page_as: Any, live_url: str
) -> None:
    config = {"prompt": "Summarise order {input.order}.", "max_tokens": 20}
    workflow = publish(
        "orders", {"nodes": [{"id": "summarise", "handler": "llm.chat", "config": config}], "edges": []}
    )
    operator = page_as("operator")
    operator.goto(f"{live_url}/providers/health/")
    row = operator.locator(ROW)
    expect(row.locator(".breaker-state")).to_contain_text("closed")

    row.locator("input[name=seconds]").fill("600")
    row.get_by_role("button", name="Force open").click()
    expect(operator.locator(ROW).locator(".breaker-state")).to_contain_text("open")
    assert BreakerDecision.objects.get().decision == "forced_open"

    started = [runs.start_run(workflow, {"order": n})[0] for n in range(3)]
    # The card refreshes itself: the held runs appear without a reload.
    expect(operator.locator(ROW).locator(".breaker-held")).to_contain_text("3", timeout=30_000)
    assert len(fake.requests) == 0
    assert set(NodeRun.objects.filter(run__workflow=workflow).values_list("status", "attempt")) == {
        ("waiting", 1)
    }
    widths(operator, "open")

    viewer = page_as("viewer")
    viewer.goto(f"{live_url}/providers/health/")
    expect(viewer.locator(ROW).locator(".breaker-held")).to_contain_text("3")
    expect(viewer.get_by_role("button", name="Close")).to_have_count(0)

    operator.locator(ROW).get_by_role("button", name="Close").click()
    expect(operator.locator(ROW).locator(".breaker-state")).to_contain_text("closed")
    for run in started:
        assert wait_finished(run, 60).status == "succeeded"
    assert len(fake.requests) == 3
    assert AuditEntry.objects.filter(action__startswith="breaker.force_").count() == 2
    widths(operator, "closed")


def test_an_admin_sets_a_providers_limits_and_a_bad_one_is_refused_by_name(
    fake: FakeLLMServer, page_as: Any, live_url: str
) -> None:
    admin = page_as("admin")
    admin.goto(f"{live_url}/providers/health/")
    limits = admin.locator('[data-limits="fakeco"]')
    limits.locator("summary").click()
    limits.locator("input[name=rpm_limit]").fill("-3")
    limits.get_by_role("button", name="Save limits of fakeco").click()
    expect(admin.locator("#limits-error")).to_contain_text("invalid")
    expect(admin.locator('[data-limits="fakeco"] input[name=rpm_limit]')).to_have_attribute(
        "aria-invalid", "true"
    )
    widths(admin, "refused")

    admin.locator('[data-limits="fakeco"] input[name=rpm_limit]').fill("600")
    admin.locator('[data-limits="fakeco"] input[name=tpm_limit]').fill("90000")
    admin.get_by_role("button", name="Save limits of fakeco").click()
    expect(admin.locator('[data-rate="fakeco"]')).to_contain_text("limit 600")
    row = LLMProvider.objects.get(name="fakeco")
    assert (row.rpm_limit, row.tpm_limit) == (600, 90_000)
    widths(admin, "limits")
