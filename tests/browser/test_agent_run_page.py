"""An agent's run page in a real browser: a full-width tree of its turns, each with the exact
messages it sent, its answer, time to first token, tokens, latency and cost, and its tool
calls nested and numbered after it (issue 28, item 2)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.browser.test_agent_steps import agent_llm, agent_runtime  # noqa: F401  # fixtures
from tests.fakes.llm_server import FakeLLMServer
from tests.integration.conftest import publish, wait_finished
from tests.integration.runtime import Runtime
from tests.integration.test_agent import completion, scripted
from workflows.runs import actions as runs
from workflows.store.models import LLMCall

SYSTEM = "You are the order desk. " + "Answer briefly and name the order. " * 30  # long: collapsed


@pytest.fixture
def finished_agent_run(agent_runtime: Runtime, agent_llm: FakeLLMServer) -> Iterator[Any]:  # noqa: F811
    agent_llm.chunk_delay = 0.02  # streamed a word at a time: a first token before the rest
    agent_llm.reply = scripted(
        completion("Let me look.", ("demo__lookup_order", {"order_id": "A-1001"})),
        completion("Order A-1001 is on its way."),
    )
    config = {
        "system": SYSTEM,
        "prompt": "Where is {input.order_id}?",
        "tools": ["demo.lookup_order"],
        "timeout_seconds": 120,
    }
    workflow = publish("agent-tree", {"nodes": [{"id": "agent", "handler": "llm.agent", "config": config}]})
    run, _ = runs.start_run(workflow, {"order_id": "A-1001"})
    assert wait_finished(run).status == "succeeded"
    yield run


def test_each_turn_shows_the_exact_messages_it_sent_and_its_calls_figures(
    finished_agent_run: Any,
    agent_llm: FakeLLMServer,  # noqa: F811  # the fixture imported above
    page_as: Any,
    live_url: str,
    screenshot: Any,
) -> None:
    run = finished_agent_run
    page: Page = page_as("viewer")
    page.goto(f"{live_url}/runs/{run.pk}/")
    page.locator('#run-graph [data-node="agent"]').click()
    tree = page.locator("#agent-steps")
    turns = tree.locator('.agent-step[data-kind="turn"]')
    expect(turns).to_have_count(2)
    expect(turns.nth(0).locator(":scope > .agent-head .agent-label")).to_have_text("turn 1")
    expect(turns.nth(1).locator(":scope > .agent-head .agent-label")).to_have_text("turn 2")

    # The messages shown are the ones the provider received, in order, role by role.
    for n, turn in enumerate((turns.nth(0), turns.nth(1))):
        sent = agent_llm.requests[n].json["messages"]
        shown = turn.locator("[data-field=messages] .msg")
        expect(shown).to_have_count(len(sent))
        assert [shown.nth(i).get_attribute("data-role") for i in range(len(sent))] == [
            m["role"] for m in sent
        ]
    first = turns.nth(0).locator("[data-field=messages]")
    expect(first.locator('.msg[data-role="user"] .msg-text')).to_have_text("Where is A-1001?")
    system = first.locator('.msg[data-role="system"] details.msg-long')
    expect(system).not_to_have_attribute("open", "")  # long: collapsed, its first line shown
    expect(system.locator("summary")).to_contain_text("You are the order desk.")
    # Turn 2 adds the first answer and the tool's result; the opening is collapsed context.
    second = turns.nth(1).locator("[data-field=messages]")
    expect(second.locator(".msg-context > details > summary")).to_contain_text("2 earlier messages")
    added = second.locator(":scope > ol > .msg")
    expect(added).to_have_count(2)
    expect(added.nth(0)).to_contain_text("demo__lookup_order")
    expect(added.nth(1)).to_have_attribute("data-role", "tool")
    expect(added.nth(1)).to_contain_text("A-1001")

    # The call's figures: time to first token as recorded, tokens, cost; the answer.
    calls = list(LLMCall.objects.filter(run=run).order_by("id"))
    assert len(calls) == 2 and all(c.first_token_ms is not None for c in calls)
    figures = turns.nth(0).locator("[data-field=figures]")
    expect(figures.locator("[data-field=ttft]")).not_to_have_text("–")
    expect(figures).to_contain_text("10 → 3 tokens")
    expect(figures).to_contain_text("cost")
    expect(turns.nth(1).locator("[data-field=response]")).to_contain_text("Order A-1001 is on its way.")

    # The tool call sits under its turn, numbered after it, with its arguments and result.
    tool = turns.nth(0).locator('.agent-step[data-kind="tool"]')
    expect(tool).to_have_count(1)
    expect(tool.locator(".agent-label")).to_have_text("↳ 1.1 demo.lookup_order")
    expect(tool).to_contain_text("order_id A-1001")

    # Wide, not a column: the detail spans the page's width; the raw JSON waits behind toggles.
    panel = page.locator("#node-panel").bounding_box()
    graph = page.locator("#run-graph").bounding_box()
    assert panel is not None and graph is not None and panel["width"] >= graph["width"]
    expect(page.locator('#node-detail details[data-raw="output"]')).not_to_have_attribute("open", "")
    expect(page.locator("#node-detail")).not_to_contain_text("LLM calls")  # one numbering: the tree only
    screenshot(page, "agent-tree")
    turns.nth(1).locator(".msg-context > details > summary").click()
    system.locator("summary").click()
    screenshot(page, "agent-tree-expanded")
