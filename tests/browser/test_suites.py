"""Suites in the browser: build a suite from recent runs on the suites page, then test the draft
against recent runs from the editor and read the report there and on its page."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from tests.integration.conftest import node, publish, wait_finished
from tests.integration.runtime import Runtime
from workflows.runs import actions as runs
from workflows.store.suites import Suite
from workflows.versions import publish as versions

ECHOES = {
    "nodes": [node("prepare", "core.echo"), node("price", "core.echo"), node("ship", "core.echo")],
    "edges": [{"source": "prepare", "target": "price"}, {"source": "price", "target": "ship"}],
}
# The draft adds a node below price: the final output gains it, so every case's output differs.
DRAFT = {
    "nodes": [*ECHOES["nodes"], node("audit", "core.echo")],
    "edges": [*ECHOES["edges"], {"source": "price", "target": "audit"}],
}


def at_widths(page: Any, screenshot: Any, name: str) -> None:
    """Screenshots at 1280 and 800 px wide (the layout is looked at at both)."""
    for width in (1280, 800):
        page.set_viewport_size({"width": width, "height": 900})
        screenshot(page, f"{name}-{width}")
    page.set_viewport_size({"width": 1400, "height": 1000})


def test_an_editor_builds_a_suite_from_recent_runs_and_tests_the_draft_against_recent_runs_from_the_editor(
    runtime: Runtime, page_as: Any, live_url: str, screenshot: Any
) -> None:
    workflow = publish("shop", ECHOES)
    made = [runs.start_run(workflow, {"order": n})[0] for n in range(3)]
    assert {wait_finished(r).status for r in made} == {"succeeded"}
    versions.create_version(workflow, DRAFT)

    page = page_as("editor")
    page.goto(f"{live_url}/workflows/shop/suites/")
    page.fill("input[name=name]", "nightly")
    page.fill("input[name=last]", "3")
    page.click("#create-suite button[type=submit]")
    expect(page.locator(".message.success")).to_contain_text("Suite nightly created with 3 cases.")
    expect(page.locator("#cases tbody tr")).to_have_count(3)
    assert Suite.objects.get(name="nightly").cases.count() == 3
    at_widths(page, screenshot, "suite")

    page.goto(f"{live_url}/workflows/shop/")
    page.click("[data-tab=suite]")
    page.fill("#ed-suite-last", "3")
    page.click("#ed-suite-start")
    expect(page.locator("#ed-suite-state")).to_have_text("failed", timeout=60_000)
    report = page.locator("#ed-suite-report")
    expect(report.locator("li[data-passed=false]")).to_have_count(3)
    expect(report).to_contain_text("0 passed, 3 failed of 3; 3 changed")
    expect(report.locator(".ed-suite-diff-link").first).to_have_text("changed: audit")
    expect(page.locator("#ed-suite-diff")).to_have_text("Diff v1 → v2")
    at_widths(page, screenshot, "editor-report")

    page.click("text=Full report")
    expect(page.locator("#suite-report")).to_have_attribute("data-state", "failed")
    expect(page.locator("#suite-cases tbody tr[data-passed=no]")).to_have_count(3)
    at_widths(page, screenshot, "report")
    page.goto(f"{live_url}/workflows/shop/suites/")
    at_widths(page, screenshot, "suites")
    page.go_back()
    page.locator("#suite-cases a.diff-link").first.click()
    expect(page.locator("h1")).to_contain_text("vs run")
