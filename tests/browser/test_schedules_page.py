"""Schedules on the workflow pages in a real browser: created, refused inline, shown, paused,
deleted by an editor; only listed for an operator."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from tests.integration.conftest import node, publish
from tests.integration.runtime import Runtime, wait_for
from workflows.schedules import timetable
from workflows.store.models import Schedule

ONE = {"nodes": [node("step")], "edges": []}


def test_an_editor_creates_a_schedule_sees_it_fire_then_pauses_and_deletes_it(
    runtime: Runtime, page_as: Any, live_url: str, screenshot: Any
) -> None:
    publish("reports", ONE)
    page = page_as("editor")
    page.goto(f"{live_url}/workflows/reports/schedules/")
    form = page.locator("#new-schedule")
    form.locator('input[name="name"]').fill("morning report")
    form.locator('input[name="cron"]').fill("61 9 * * *")
    form.locator('input[name="timezone"]').fill("Mars/Olympus")
    form.locator("button[type=submit]").click()
    expect(page.locator('[data-error-for="cron"]')).to_contain_text("Bad minute")
    expect(page.locator('[data-error-for="timezone"]')).to_contain_text("Mars/Olympus")
    screenshot(page, "schedule-refused")
    assert not Schedule.objects.exists()

    form.locator('input[name="cron"]').fill("")
    form.locator('select[name="kind"]').select_option("interval")
    form.locator('input[name="interval_seconds"]').fill("2")
    form.locator('input[name="timezone"]').fill("Europe/Berlin")
    form.locator('input[name="priority"]').fill("3")
    form.locator("button[type=submit]").click()
    schedule = wait_for(lambda: Schedule.objects.filter(name="morning report").first(), 20, "the schedule")
    row = page.locator(f'#schedules tr[data-schedule="{schedule.pk}"]')
    expect(row).to_contain_text("every 2 s")
    wait_for(lambda: schedule.workflow.runs.exists(), 30, "a scheduled run")
    page.reload()
    expect(row.locator("a.badge").first).to_contain_text("#")
    screenshot(page, "schedules")

    page.goto(f"{live_url}/workflows/reports/live/")
    expect(page.locator("#workflow-schedules")).to_contain_text("morning report")
    screenshot(page, "workflow-live-schedules")

    page.goto(f"{live_url}/workflows/reports/schedules/")
    row.get_by_role("button", name="Pause").click()
    expect(row).to_contain_text("paused")
    assert Schedule.objects.get(pk=schedule.pk).enabled is False
    row.locator("summary").click()
    row.get_by_role("button", name="Delete morning report (its runs stay)").click()
    expect(page.locator("#schedules")).to_contain_text("No schedules")
    assert not Schedule.objects.exists()


def test_an_operator_sees_schedules_but_no_form(runtime: Runtime, page_as: Any, live_url: str) -> None:
    publish("reports", ONE)
    page = page_as("operator")
    page.goto(f"{live_url}/workflows/reports/schedules/")
    expect(page.locator("#schedules")).to_be_visible()
    expect(page.locator("#new-schedule")).to_have_count(0)
    response = page.request.post(f"{live_url}/workflows/reports/schedules/", form={"name": "x"})
    assert response.status == 403


def test_the_schedules_page_lists_every_workflows_schedules_and_an_operator_pauses_and_runs_one(
    runtime: Runtime, page_as: Any, live_url: str, screenshot: Any
) -> None:
    reports = publish("reports", ONE)
    billing = publish("billing", ONE)
    nightly = timetable.create_schedule(
        reports, {"name": "nightly", "cron": "0 3 * * *", "timezone": "Europe/Berlin"}
    )
    hourly = timetable.create_schedule(billing, {"name": "hourly invoices", "cron": "0 * * * *"})
    viewer = page_as("viewer")
    viewer.goto(f"{live_url}/")
    viewer.locator('nav [data-link="schedules"]').click()
    board = viewer.locator("#schedules-board")
    expect(board.locator("tbody tr")).to_have_count(2)
    expect(board.get_by_role("button")).to_have_count(0)  # a viewer only reads
    next_fire = board.locator(f'tr[data-schedule="{hourly.pk}"] [data-field="next"] time')
    expect(next_fire).to_have_attribute("title", re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d"))
    expect(next_fire).to_contain_text("in ")
    viewer.fill('#schedule-search [data-field="q"]', "billing")
    viewer.click("#schedule-search button")
    expect(board.locator("tbody tr")).to_have_count(1)
    expect(board).to_contain_text("hourly invoices")

    page = page_as("operator")
    page.goto(f"{live_url}/schedules/")
    row = page.locator(f'#schedules-board tr[data-schedule="{nightly.pk}"]')
    expect(row.locator('[data-field="last"]')).to_contain_text("none yet")
    row.locator('[data-action="run"]').click()
    run = wait_for(lambda: reports.runs.first(), 10, "the run started now")
    expect(row.locator('[data-link="last-run"]')).to_have_text(f"#{run.pk}")
    assert run.idempotency_key.startswith(f"schedule:{nightly.pk}:now:")
    row.locator('[data-action="pause"]').click()
    expect(row.locator('[data-field="state"]')).to_have_text("paused")
    expect(row.locator('[data-field="next"]')).to_contain_text("not while paused")
    assert Schedule.objects.get(pk=nightly.pk).enabled is False
    expect(row.locator('[data-action="edit"]')).to_have_count(0)
    page.set_viewport_size({"width": 1280, "height": 700})
    screenshot(page, "board-1280")
    page.set_viewport_size({"width": 800, "height": 700})
    screenshot(page, "board-800")
    row.locator('[data-action="resume"]').click()
    expect(row.locator('[data-field="state"]')).to_have_text("enabled")
