"""Starting a run from the UI in Chromium: the dialog's form drawn from the version's input
schema, its JSON mode, refusals shown beside their fields, and the landing on the run page;
offered on the workflow list, the live page, the runs page and the editor, to operators up."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.factories import CHAIN, make_workflow
from workflows.store.models import Run

PageAs = Callable[[str], Page]
Screenshot = Callable[[Page, str], Path]
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "user_id": {"type": "string", "minLength": 2, "description": "Who the profile is for."},
        "count": {"type": "integer", "minimum": 1},
        "tier": {"enum": ["free", "pro"]},
    },
    "required": ["user_id", "count"],
}
RUN_PAGE = re.compile(r".*/runs/(\d+)/$")
PROVOKED = "the server responded with a status of 422"


@pytest.fixture
def console_errors() -> Iterator[Callable[[Page], list[str]]]:
    """Watch pages for console errors and uncaught exceptions; none may be left at the end.

    Chromium logs every 4xx answer to a fetch as an error; the 422 refusals a test provokes
    on purpose are that network log, not a fault of the page, and are let through.
    """
    seen: list[str] = []

    def record(page: Page, text: str) -> None:
        if PROVOKED not in text:
            seen.append(f"{page.url}: {text}")

    def watch(page: Page) -> list[str]:
        page.on("console", lambda m: record(page, m.text) if m.type == "error" else None)
        page.on("pageerror", lambda error: seen.append(f"{page.url}: {error}"))
        return seen

    yield watch
    assert seen == [], f"console errors: {seen}"


def field(page: Page, path: str) -> Any:
    return page.locator(f'#sr-dialog [data-field="{path}"]')


def test_a_run_started_from_the_form_lands_on_its_run_page(
    page_as: PageAs, live_url: str, screenshot: Screenshot, console_errors: Any
) -> None:
    make_workflow("typed", {**CHAIN, "input_schema": SCHEMA})
    page = page_as("operator")
    console_errors(page)
    page.goto(f"{live_url}/workflows/")
    page.click('[data-start-run="typed"]')
    dialog = page.locator("#sr-dialog")
    expect(dialog).to_have_attribute("data-state", "ready")
    expect(dialog).to_contain_text("runs v1, the active version")
    expect(field(page, "input.user_id")).to_contain_text("Who the profile is for.")
    field(page, "input.user_id").locator("input").fill("u-7")
    field(page, "input.count").locator("input").fill("3")
    field(page, "input.tier").locator("select").select_option(label="pro")
    page.fill("#sr-key", "order-1")
    page.fill("#sr-priority", "7")
    screenshot(page, "form")
    page.click("#sr-start")
    page.wait_for_url(RUN_PAGE)
    run = Run.objects.get(workflow__slug="typed")
    assert page.url.endswith(f"/runs/{run.pk}/")
    assert (run.input, run.idempotency_key) == ({"user_id": "u-7", "count": 3, "tier": "pro"}, "order-1")
    assert run.priority == 7
    screenshot(page, "run-page")


def test_input_schema_violations_are_shown_beside_their_fields(
    page_as: PageAs, live_url: str, screenshot: Screenshot, console_errors: Any
) -> None:
    make_workflow("plain", CHAIN)
    make_workflow("typed", {**CHAIN, "input_schema": SCHEMA})
    page = page_as("operator")
    console_errors(page)
    page.goto(f"{live_url}/runs/")
    page.click('[data-start-run=""]')  # the runs page: the workflow is chosen in the dialog
    page.select_option("#sr-workflow", "typed")
    expect(page.locator("#sr-dialog")).to_have_attribute("data-state", "ready")
    field(page, "input.user_id").locator("input").fill("x")
    page.click("#sr-start")
    expect(page.locator("#sr-dialog")).to_have_attribute("data-state", "refused")
    expect(field(page, "input.user_id").locator(".ed-field-issues")).to_have_text("'x' is too short")
    expect(field(page, "input.count").locator(".ed-field-issues")).to_have_text("is required")
    expect(page.locator("#sr-errors")).to_contain_text("does not match this workflow's input schema")
    screenshot(page, "refused")
    assert Run.objects.count() == 0

    page.click("#sr-mode")  # JSON mode keeps what the form held
    expect(page.locator("#sr-json")).to_have_value('{\n  "user_id": "x"\n}')
    page.fill("#sr-json", '{"user_id": "u-8", "count": "three"}')
    page.click("#sr-start")
    expect(field(page, "input").locator(".ed-field-issues")).to_have_text(
        "input.count: 'three' is not of type 'integer'"
    )
    page.fill("#sr-json", "[1]")
    page.click("#sr-start")
    expect(field(page, "input").locator(".ed-field-issues")).to_contain_text("must be a JSON object")
    page.fill("#sr-json", '{"user_id": "u-8", "count": 2}')
    page.click("#sr-start")
    page.wait_for_url(RUN_PAGE)
    assert Run.objects.get().input == {"user_id": "u-8", "count": 2}


def test_a_workflow_without_an_input_schema_is_started_with_json(
    page_as: PageAs, live_url: str, console_errors: Any
) -> None:
    make_workflow("plain", CHAIN)
    page = page_as("operator")
    console_errors(page)
    page.goto(f"{live_url}/workflows/plain/live/")
    page.click('[data-start-run="plain"]')
    expect(page.locator("#sr-dialog")).to_contain_text("declares no input schema")
    expect(page.locator("#sr-mode")).to_be_hidden()
    page.fill("#sr-json", '{"anything": [1, 2]}')
    page.click("#sr-start")
    page.wait_for_url(RUN_PAGE)
    assert Run.objects.get().input == {"anything": [1, 2]}


def test_the_editor_starts_runs_for_operators_and_viewers_get_no_button(
    page_as: PageAs, live_url: str, console_errors: Any
) -> None:
    make_workflow("typed", {**CHAIN, "input_schema": SCHEMA})
    viewer = page_as("viewer")
    console_errors(viewer)
    for path in ("/workflows/", "/workflows/typed/live/", "/runs/", "/workflows/typed/"):
        viewer.goto(f"{live_url}{path}")
        expect(viewer.locator('[data-start-run], [data-cmd="start-run"]')).to_have_count(0)
    operator = page_as("operator")
    console_errors(operator)
    operator.goto(f"{live_url}/workflows/typed/")
    expect(operator.locator("#editor")).to_have_attribute("data-layout", "done")
    operator.click('[data-cmd="start-run"]')
    field(operator, "input.user_id").locator("input").fill("u-9")
    field(operator, "input.count").locator("input").fill("1")
    operator.click("#sr-start")
    operator.wait_for_url(RUN_PAGE)
    assert Run.objects.get().input == {"user_id": "u-9", "count": 1}
