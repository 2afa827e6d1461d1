"""A replay with edited input is visible on the run page (issue 28, item 5): the node's row
says so, and its detail tells who edited, when, and each field against the original."""

from __future__ import annotations

import re
from typing import Any

from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from tests.integration.conftest import publish, wait_finished
from tests.integration.runtime import Runtime
from workflows.runs import actions as runs
from workflows.store.models import DeadLetter

FLOW = {
    "nodes": [
        {
            "id": "check",
            "handler": "core.validate",
            "config": {"schema": {"type": "object", "properties": {"amount": {"type": "integer"}}}},
        },
        {"id": "done", "handler": "core.echo"},
    ],
    "edges": [{"source": "check", "target": "done"}],
}


def test_a_node_replayed_with_edited_input_shows_who_when_and_the_diff(
    runtime: Runtime, page_as: Any, live_url: str, users: dict[str, User], screenshot: Any
) -> None:
    workflow = publish("edited-replay", FLOW)
    run, _ = runs.start_run(workflow, {"amount": "12", "note": "rush", "old": True})
    assert wait_finished(run).status == "failed"
    letter = DeadLetter.objects.get(run=run, node_id="check")
    runs.replay_dead_letter(letter.pk, users["operator"], {"amount": 12, "note": "rush", "new": "yes"})
    assert wait_finished(run).status == "succeeded"

    page: Page = page_as("viewer")
    page.goto(f"{live_url}/runs/{run.pk}/")
    expect(page.locator('#run-nodes tr[data-node="check"] [data-field="edited"]')).to_have_text(
        "edited input"
    )
    expect(page.locator('#run-nodes tr[data-node="done"] [data-field="edited"]')).to_have_count(0)
    page.locator('#run-graph [data-node="check"]').click()
    edit = page.locator("#input-edits .input-edit")
    expect(edit).to_have_count(1)
    expect(edit.locator('[data-field="by"]')).to_have_text("operator")
    expect(edit.locator("time")).to_have_attribute("datetime", re.compile(".+"))
    # One date format: relative text, the absolute time in the reader's zone (with ms) on hover.
    expect(edit.locator("time")).to_have_text(re.compile(r"just now|\d+ s ago"))
    expect(edit.locator("time")).to_have_attribute(
        "title", re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}")
    )
    expect(edit).to_contain_text(f"dead letter {letter.pk}")
    rows = edit.locator('[data-field="diff"] tbody tr')
    expect(rows).to_have_count(3)  # amount changed, new added, old removed; note unchanged
    expect(rows.nth(0)).to_contain_text('amount"12"12')
    expect(rows.nth(1)).to_contain_text("new")
    expect(rows.nth(1).locator(".diff-old")).to_have_text("absent")
    expect(rows.nth(2)).to_contain_text("old")
    expect(rows.nth(2).locator(".diff-new")).to_have_text("removed")
    expect(page.locator('#node-detail [data-input="edited"]')).to_contain_text('"amount": 12')
    screenshot(page, "edited-replay")
