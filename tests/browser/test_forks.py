"""Forks in the browser: fork from the run page, watch the fork run, compare it with its origin."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.browser.test_ops import Console
from tests.integration.conftest import node, publish, wait_finished
from tests.integration.runtime import Runtime
from workflows.runs import actions as runs
from workflows.store.forks import RunFork
from workflows.store.models import NodeRun

ECHOES = {
    "nodes": [node("prepare", "core.echo"), node("price", "core.echo"), node("ship", "core.echo")],
    "edges": [{"source": "prepare", "target": "price"}, {"source": "price", "target": "ship"}],
}


@pytest.fixture
def operator_page(page_as: Any) -> Iterator[Callable[[str], Page]]:
    """An operator's page, watched for console errors and failed responses from the first page it is sent to.

    page_as opens the overview first; its requests are left behind (about:blank) so that
    only this test's pages are watched. Chromium's console note of the favicon's 404 (the
    site has none) is dropped: Playwright reports no response for it, and any other failed
    request is caught by its response, with its URL.
    """
    console = Console()
    page = page_as("operator")
    page.goto("about:blank")
    console.watch(page)
    page.on("response", lambda r: console.errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)

    def goto(url: str) -> Page:
        page.goto(url)
        return page

    yield goto
    console.expected(404)
    assert console.errors == [], "console errors"


def test_an_operator_forks_a_run_at_a_node_with_edited_input_and_compares_it_with_the_origin(
    runtime: Runtime, operator_page: Callable[[str], Page], live_url: str, screenshot: Any
) -> None:
    origin, _ = runs.start_run(publish("fork-me", ECHOES), {"order": 8})
    assert wait_finished(origin).status == "succeeded"
    page = operator_page(f"{live_url}/runs/{origin.pk}/")
    page.click("[data-action=open-fork]")
    page.select_option("[data-field=fork-node]", "price")
    page.fill("[data-field=fork-input]", '{"order": 9}')
    screenshot(page, "fork-dialog")
    page.click("[data-action=fork]")

    expect(page.locator(".message.success")).to_contain_text(f"forks run {origin.pk} at price")
    fork = RunFork.objects.get(origin=origin)
    assert page.url.endswith(f"/runs/{fork.run_id}/")
    expect(page.locator("[data-fork-origin]")).to_contain_text(f"Forked from run #{origin.pk} at node price")
    expect(page.locator("[data-fork-origin]")).to_contain_text("carried over: prepare")
    expect(page.locator("[data-run-status]")).to_have_text("succeeded")
    screenshot(page, "fork-run")
    assert NodeRun.objects.get(run_id=fork.run_id, node_id="prepare").attempt == 0, "carried, not run"

    page.click("[data-link=compare-origin]")
    expect(page.locator("h1")).to_contain_text(f"Run #{origin.pk} vs run #{fork.run_id}")
    nodes = page.locator("[data-table=nodes]")
    expect(nodes.locator("tr[data-node=prepare]")).to_have_attribute("data-verdict", "same")
    expect(nodes.locator("tr[data-node=prepare]")).to_contain_text("carried")
    expect(nodes.locator("tr[data-node=price]")).to_have_attribute("data-verdict", "changed")
    expect(nodes.locator("tr[data-diff=price] tr[data-path='$.input.order']")).to_contain_text("8")
    expect(nodes.locator("tr[data-diff=price] tr[data-path='$.input.order']")).to_contain_text("9")
    expect(page.locator("[data-counts]")).to_contain_text("1 same")
    screenshot(page, "comparison")
    page.click("[data-link=only-changed]")
    expect(nodes.locator("tr[data-node]")).to_have_count(2)

    page.goto(f"{live_url}/runs/{origin.pk}/")
    expect(page.locator(f"[data-fork='{fork.run_id}']")).to_contain_text("price")


def test_a_fork_refused_in_the_browser_names_the_upstream_node_and_keeps_the_choices(
    page_as: Any, live_url: str, screenshot: Any
) -> None:
    origin, _ = runs.start_run(publish("fork-refused", ECHOES), {"order": 8})  # nothing runs: no workers
    console = Console()
    page = page_as("operator")
    page.goto("about:blank")
    console.watch(page)
    page.on("response", lambda r: console.errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.goto(f"{live_url}/runs/{origin.pk}/")
    page.click("[data-action=open-fork]")
    page.select_option("[data-field=fork-node]", "ship")
    page.click("[data-action=fork]")
    problem = page.locator("[data-problem='422']")
    expect(problem.locator("li[data-node=prepare]")).to_contain_text(
        re.compile("upstream node 'prepare' is (queued|pending) in the run")
    )
    expect(problem.locator("li[data-node=price]")).to_contain_text(
        "upstream node 'price' is pending in the run"
    )
    expect(page.locator("[data-field=fork-node]")).to_have_value("ship")
    console.expected(422)
    console.expected(404)  # the favicon, as above
    assert console.errors == [f"422 {live_url}/runs/{origin.pk}/fork/"]
    screenshot(page, "refused")
    assert not RunFork.objects.exists()
