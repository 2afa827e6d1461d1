"""Operators' pages in Chromium: run search, dead-letter groups and bulk, a replay followed live,
the run page's trace, logs and re-run, and every page free of console errors."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.integration.conftest import node, publish, wait_finished
from tests.integration.runtime import Runtime
from workflows.core.signatures import error_signature
from workflows.runs import actions as runs
from workflows.store.models import DeadLetter, NodeRun, Run, Workflow


class Console:
    """The console errors and uncaught exceptions of the pages it watches."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def expected(self, status: int) -> None:
        """Drop the browser's note of a refusal the test provoked (an HTTP status, not a page error)."""
        self.errors = [e for e in self.errors if f"status of {status}" not in e]

    def watch(self, page: Page) -> Page:
        page.on(
            "console", lambda m: self.errors.append(f"{page.url}: {m.text}") if m.type == "error" else None
        )
        page.on("pageerror", lambda e: self.errors.append(f"{page.url}: {e}"))
        return page


@pytest.fixture
def console() -> Iterator[Console]:
    watcher = Console()
    yield watcher
    assert watcher.errors == [], "console errors"


def chain() -> Workflow:
    return publish(
        "ops-chain",
        {"nodes": [node("a"), node("b")], "edges": [{"source": "a", "target": "b"}]},
    )


def letter_of(workflow: Workflow, error: str, run_input: dict[str, Any]) -> DeadLetter:
    """A failed run whose node b died with `error`, filed as the engine files it."""
    run, _ = runs.start_run(workflow, run_input)
    NodeRun.objects.filter(run=run, node_id="a").update(status="succeeded", attempt=1)
    b = NodeRun.objects.get(run=run, node_id="b")
    NodeRun.objects.filter(pk=b.pk).update(status="dead", attempt=1, error=error)
    Run.objects.filter(pk=run.pk).update(status="failed")
    return DeadLetter.objects.create(
        run=run, node_run=b, node_id="b", attempt=1, error=error, signature=error_signature(error)
    )


def test_search_finds_a_run_by_an_input_value(
    page_as: Any, live_url: str, console: Console, screenshot: Any
) -> None:
    workflow = chain()
    wanted, _ = runs.start_run(workflow, {"customer": "acme", "order": {"total": 12}})
    for n in range(5):
        runs.start_run(workflow, {"customer": f"other-{n}"})
    page = console.watch(page_as("viewer"))
    page.goto(f"{live_url}/runs/")
    expect(page.locator("tr[data-run]")).to_have_count(6)
    page.fill("input[name=input]", "customer=acme order.total=12")
    page.press("input[name=input]", "Enter")
    expect(page.locator("tr[data-run]")).to_have_count(1)
    expect(page.locator(f'tr[data-run="{wanted.pk}"]')).to_be_visible()
    assert "input=customer" in page.url
    screenshot(page, "runs-search")


def test_discard_all_matching_of_a_group(
    page_as: Any, live_url: str, console: Console, screenshot: Any
) -> None:
    workflow = chain()
    group = [letter_of(workflow, f"HTTP 503 from /users/{u} after {u}.5 s", {"u": u}).pk for u in range(4)]
    other = letter_of(workflow, "KeyError: 'email'", {"u": 9}).pk
    page = console.watch(page_as("operator"))
    page.goto(f"{live_url}/dead-letters/")
    rows = page.locator("tr[data-group]")
    expect(rows).to_have_count(2)
    biggest = rows.first
    expect(biggest.locator("[data-field=count]")).to_have_text("4")
    expect(biggest).to_contain_text("HTTP <n> from /users/<n> after <n> s")
    screenshot(page, "groups")
    biggest.locator("[data-action=open-group]").click()
    expect(page.locator("tr[data-letter]")).to_have_count(4)
    page.check("[data-field=all-matching]")
    page.fill("[data-field=reason]", "upstream outage, fixed")
    page.click("[data-action=discard]")
    expect(page.locator("h1")).to_contain_text("Discard 4 dead letters?")
    screenshot(page, "confirm")
    page.click("[data-action=confirm]")
    expect(page.locator(".message.success")).to_contain_text("Discarded 4")
    assert set(DeadLetter.objects.filter(pk__in=group).values_list("status", flat=True)) == {"discarded"}
    assert DeadLetter.objects.get(pk=other).status == "open"


def test_a_refused_discard_keeps_the_selection(
    page_as: Any, live_url: str, console: Console, screenshot: Any
) -> None:
    workflow = chain()
    letters = [letter_of(workflow, "boom", {"u": u}).pk for u in range(3)]
    page = console.watch(page_as("operator"))
    page.goto(f"{live_url}/dead-letters/?view=list")
    for letter in letters[:2]:
        page.check(f'input[name=ids][value="{letter}"]')
    page.click("[data-action=discard]")
    expect(page.locator("[data-refusal]")).to_contain_text("needs a reason")
    for letter in letters[:2]:
        expect(page.locator(f'input[name=ids][value="{letter}"]')).to_be_checked()
    expect(page.locator(f'input[name=ids][value="{letters[2]}"]')).not_to_be_checked()
    console.expected(400)
    screenshot(page, "refused-kept")
    page.fill("[data-field=reason]", "duplicates")
    page.click("[data-action=discard]")
    expect(page.locator(".message.success")).to_contain_text("Discarded 2")
    assert DeadLetter.objects.get(pk=letters[2]).status == "open"


FLAKY = {
    "nodes": [
        node("prepare", "core.echo"),
        node(
            "flaky",
            "core.flaky",
            config={"succeed_on_attempt": 3},
            retry={"max_attempts": 2, "backoff_seconds": 0.3},
        ),
        node("last"),
    ],
    "edges": [{"source": "prepare", "target": "flaky"}, {"source": "flaky", "target": "last"}],
}


def test_a_replay_is_followed_live_to_success_on_the_letter_page(
    runtime: Runtime, page_as: Any, live_url: str, console: Console, screenshot: Any
) -> None:
    run, _ = runs.start_run(publish("ops-flaky", FLAKY), {"order": 7})
    wait_finished(run)
    letter = DeadLetter.objects.get(run=run)
    page = console.watch(page_as("operator"))
    page.goto(f"{live_url}/dead-letters/{letter.pk}/")
    page.click("[data-action=replay]")
    outcome = page.locator("#replay-outcome")
    expect(outcome.locator("[data-field=replay-status]")).to_have_text("succeeded")
    expect(outcome.locator('tr[data-attempt="3"]')).to_contain_text("succeeded")
    expect(outcome.locator("[data-link=attempt]")).to_have_attribute(
        "href", f"/runs/{run.pk}/?node=flaky#node-panel"
    )
    screenshot(page, "replay-followed")
    outcome.locator("[data-link=attempt]").click()
    expect(page.locator("#node-detail [data-attempt-log='3']")).to_contain_text("attempt 3 of node flaky")


def test_run_page_draws_trace_segments_shows_logs_and_reruns_from_a_node(
    runtime: Runtime, page_as: Any, live_url: str, console: Console, screenshot: Any
) -> None:
    definition = {
        **FLAKY,
        "nodes": [
            FLAKY["nodes"][0],
            {**FLAKY["nodes"][1], "config": {"succeed_on_attempt": 2}},
            FLAKY["nodes"][2],
        ],
    }
    run, _ = runs.start_run(publish("ops-trace", definition), {"order": 8})
    assert wait_finished(run).status == "succeeded"
    page = console.watch(page_as("operator"))
    page.goto(f"{live_url}/runs/{run.pk}/")
    trace = page.locator("#run-timeline")
    expect(trace.locator("[data-segment=attempt][data-node=flaky]")).to_have_count(2)
    expect(trace.locator("[data-segment=backoff][data-node=flaky]")).to_have_count(1)
    expect(trace.locator("[data-segment=queue]").first).to_be_attached()
    page.click("[data-zoom=in]")
    expect(trace.locator("svg.timeline-svg")).to_have_attribute("data-zoom", "2")
    page.click("[data-node-label=flaky]")  # zooms to the node's segments, scrolled into view
    zoomed = trace.locator("[data-segment=attempt][data-node=flaky]").first
    expect(zoomed).to_be_in_viewport()
    screenshot(page, "trace-node-zoom")
    page.click("[data-zoom=fit]")
    expect(trace.locator("svg.timeline-svg")).to_have_attribute("data-zoom", "1")
    expect(page.locator("[data-field=output]")).to_contain_text("last")
    screenshot(page, "trace")

    page.locator('#run-nodes tr[data-node="flaky"]').click()
    logs = page.locator("#node-detail [data-attempt-log='1']")
    expect(logs).to_contain_text("core.flaky: attempt 1 of node flaky; attempt 2 succeeds")
    screenshot(page, "logs")

    page.click("#node-detail [data-action=rerun-node]")
    expect(page.locator(".message.success")).to_contain_text("re-runs from flaky: flaky, last")
    expect(page.locator("[data-run-status]")).to_have_text("succeeded")
    flaky = NodeRun.objects.get(run=run, node_id="flaky")
    assert (flaky.status, flaky.attempt) == ("succeeded", 3)
    assert NodeRun.objects.get(run=run, node_id="prepare").attempt == 1, "the node above was not re-run"
    expect(page.locator("[data-audit='run.rerun']")).to_be_attached()


def test_every_page_is_free_of_console_errors(
    page_as: Any, live_url: str, console: Console, screenshot: Any
) -> None:
    workflow = chain()
    letter = letter_of(workflow, "boom 1", {"u": 1})
    page = console.watch(page_as("admin"))
    paths = [
        "/",
        "/runs/",
        "/runs/?input=u=1",
        f"/runs/{letter.run_id}/",
        "/dead-letters/",
        "/dead-letters/?view=list",
        f"/dead-letters/{letter.pk}/",
        "/workers/",
        "/inbox/",
        f"/workflows/{workflow.slug}/live/",
        "/workflows/",
        f"/workflows/{workflow.slug}/history/",
    ]
    for path in paths:
        page.goto(f"{live_url}{path}")
        page.wait_for_load_state("networkidle")
    page.goto(f"{live_url}/runs/?input=customer")
    expect(page.locator("[data-problem]")).to_contain_text("is not a search term")
    console.expected(400)
    page.goto(f"{live_url}/no/such/page/")
    expect(page.locator("[data-error-page='404']")).to_be_visible()
    screenshot(page, "404")
    console.expected(404)
    page.goto(f"{live_url}/deadletters/")
    expect(page.locator("h1")).to_have_text("Dead letters")
    expect(page.locator("[data-link=api-docs]")).to_have_attribute("href", "/api/v1/docs")
