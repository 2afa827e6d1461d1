"""Test runs in production lists (issue 28, items 6 and 7): a test run's version is labelled
a test version wherever its number is shown, and test runs are left out of the runs list and
the overview's counts unless asked for."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page, expect

from tests.factories import add_draft, make_workflow
from tests.integration.conftest import wait_finished
from tests.integration.runtime import Runtime
from workflows.runs import actions as runs
from workflows.versions import editing

FLOW = {"nodes": [{"id": "only", "handler": "core.noop"}], "edges": []}
CHANGED = {
    "nodes": [{"id": "only", "handler": "core.noop"}, {"id": "more", "handler": "core.noop"}],
    "edges": [],
}


def test_test_runs_are_left_out_of_the_runs_list_unless_asked_and_their_version_is_labelled(
    runtime: Runtime, page_as: Any, live_url: str, screenshot: Any
) -> None:
    workflow = make_workflow("shop-tests", FLOW, publish=True)
    real, _ = runs.start_run(workflow, {})
    draft = add_draft(workflow, CHANGED)
    test = editing.start_test_run(draft, {})
    wait_finished(real)
    wait_finished(test)
    assert test.is_test and test.version.is_test_version and test.version.number == 3

    page: Page = page_as("operator")
    page.goto(f"{live_url}/runs/")
    rows = page.locator("#runs-list tbody tr[data-run]")
    expect(rows).to_have_count(1)
    expect(page.locator(f'#runs-list tr[data-run="{real.pk}"]')).to_be_visible()
    # Safe bulk defaults: nothing ticked, and each button states its count.
    expect(page.locator("#runs-list input[name=ids]:checked")).to_have_count(0)
    expect(page.locator('[data-action="cancel-selected"]')).to_have_text("Cancel 0 selected")
    expect(page.locator('[data-action="cancel-matching"]')).to_have_text("Cancel all 0 matching…")
    expect(page.locator('[data-action="cancel-matching"]')).to_be_disabled()
    page.locator('#runs-filters [data-field="tests"]').check()
    expect(rows).to_have_count(2)
    row = page.locator(f'#runs-list tr[data-run="{test.pk}"]')
    expect(row.locator("[data-test-version]")).to_have_text("test")
    expect(row).to_contain_text("v3 test")
    expect(row.locator('[data-field="test-run"]')).to_have_text("test run")
    page.set_viewport_size({"width": 1280, "height": 700})
    screenshot(page, "runs-with-tests-1280")
    page.set_viewport_size({"width": 800, "height": 700})
    screenshot(page, "runs-with-tests-800")

    api = page.request
    listed = api.get(f"{live_url}/api/v1/runs").json()["items"]
    assert [r["id"] for r in listed] == [real.pk]
    everything = api.get(f"{live_url}/api/v1/runs?include_tests=true").json()["items"]
    assert [(r["id"], r["test_run"], r["test_version"]) for r in everything] == [
        (test.pk, True, True),
        (real.pk, False, False),
    ]

    page.goto(f"{live_url}/runs/{test.pk}/")
    expect(page.locator('h1 [data-link="version"]')).to_have_text("v3 test")
    page.goto(f"{live_url}/workflows/shop-tests/history/")
    expect(page.locator("[data-test-version]")).to_have_count(1)
    screenshot(page, "history-800")
