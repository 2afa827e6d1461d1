"""An agent node's steps on the run page, in a real browser: a nested timeline that grows."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.fakes.llm_server import FakeLLMServer
from tests.integration.conftest import publish, wait_finished
from tests.integration.runtime import Runtime, wait_for
from tests.integration.test_agent import completion, scripted
from workflows.runs import actions as runs
from workflows.runtime import bus
from workflows.store.models import AgentStep


@pytest.fixture
def agent_llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


@pytest.fixture
def agent_runtime(transactional_db: None, agent_llm: FakeLLMServer) -> Iterator[Runtime]:
    bus.client().flushdb()
    bus.ensure_group()
    rt = Runtime(
        LLM_BASE_URL=agent_llm.base_url, LLM_MODEL="fake-model", SWITCHYARD_MONITOR_INTERVAL_SECONDS="0.2"
    )
    rt.worker("worker-1")
    rt.scheduler("scheduler-1")
    rt.broadcaster("broadcaster")
    yield rt
    rt.stop()


def test_the_run_page_shows_turns_and_nested_tool_calls_as_they_happen(
    agent_runtime: Runtime, agent_llm: FakeLLMServer, page_as: Any, live_url: str, screenshot: Any
) -> None:
    held, released = threading.Event(), threading.Event()

    def answer() -> dict[str, Any]:
        held.set()
        released.wait(60)
        return completion("Order A-1001 is on its way; the weather will not delay it.")

    agent_llm.reply = scripted(
        completion(
            None, ("demo__lookup_order", {"order_id": "A-1001"}), ("demo__get_weather", {"city": "Lisbon"})
        ),
        completion(None, ("demo__calculator", {"a": 2, "b": 0, "op": "/"})),
        answer,
    )
    tools = ["demo.lookup_order", "demo.get_weather", "demo.calculator"]
    # Generous time limits: the last answer is held until the page has been looked at.
    config = {"prompt": "Where is {input.order_id}?", "tools": tools, "timeout_seconds": 300}
    agent = {"id": "agent", "handler": "llm.agent", "config": config, "timeout_seconds": 600}
    workflow = publish("agent-page", {"nodes": [agent]})
    run, _ = runs.start_run(workflow, {"order_id": "A-1001"})
    wait_for(held.is_set, 60, "the last model turn to be asked")

    page: Page = page_as("viewer")
    page.goto(f"{live_url}/runs/{run.pk}/")
    agent_box = page.locator('#run-graph [data-node="agent"]')
    expect(agent_box).to_have_attribute("data-status", "running")  # the page's scripts are up
    agent_box.click()
    steps = page.locator("#agent-steps")
    expect(steps.locator(".agent-step")).to_have_count(5)
    tools = steps.locator(".agent-step.depth-1")
    expect(tools.nth(0)).to_contain_text("demo.lookup_order")
    expect(tools.nth(0)).to_contain_text("order_id A-1001")
    expect(tools.nth(1)).to_contain_text("demo.get_weather")
    expect(tools.nth(2)).to_contain_text("told to the model")
    expect(tools.nth(2)).to_contain_text("division by zero")
    expect(steps.locator('.agent-step[data-kind="turn"]').first).to_contain_text("10 → 3 tokens")
    screenshot(page, "agent-steps-running")

    released.set()
    assert wait_finished(run).status == "succeeded"
    expect(steps.locator(".agent-step")).to_have_count(6)  # the panel polled the last turn in
    expect(steps.locator(".agent-step").last).to_contain_text("turn 3")
    expect(steps.locator(".agent-step").last).to_contain_text("on its way")
    expect(steps).not_to_have_attribute("hx-trigger", "every 1s")  # and stopped polling
    expect(page.locator("#node-detail .cardhead .badge")).to_have_text("succeeded")  # the panel reloaded
    assert AgentStep.objects.filter(node_run__run=run).count() == 6
    page.locator(".agent-step.depth-1 details summary").first.click()
    screenshot(page, "agent-steps-done")


WORDS = [f"token{n}" for n in range(40)]


def test_an_agent_turns_text_grows_on_the_run_page_and_the_live_page_before_the_turn_is_recorded(
    agent_runtime: Runtime, agent_llm: FakeLLMServer, page_as: Any, live_url: str, screenshot: Any
) -> None:
    agent_llm.chunk_delay = 0.25
    agent_llm.reply = scripted(
        completion("Looking the order up.", ("demo__lookup_order", {"order_id": "A-1001"})),
        completion(" ".join(WORDS)),
    )
    config = {"prompt": "Where is {input.order_id}?", "tools": ["demo.lookup_order"], "timeout_seconds": 120}
    workflow = publish("agent-stream", {"nodes": [{"id": "agent", "handler": "llm.agent", "config": config}]})
    page: Page = page_as("viewer")
    live_page = page.context.new_page()
    live_page.goto(f"{live_url}/workflows/{workflow.slug}/live/")
    run, _ = runs.start_run(workflow, {"order_id": "A-1001"})
    page.goto(f"{live_url}/runs/{run.pk}/")
    page.locator('#run-graph [data-node="agent"]').click()

    turn = page.locator('#node-detail [data-agent-live="agent"]')
    expect(turn.locator("[data-live-text]")).to_contain_text("token3")
    assert not AgentStep.objects.filter(node_run__run=run, seq=3).exists(), "turn 2 is not recorded yet"
    assert "token39" not in turn.inner_text()
    expect(turn.locator("[data-live-label]")).to_have_text("turn 2")
    expect(turn.locator("[data-live-state]")).to_contain_text("attempt 1 · writing…")
    expect(page.locator("#agent-steps .agent-step")).to_have_count(2)  # turn 1 and its tool call, recorded
    card = page.locator('#llm-streams [data-stream$=":agent"]')
    expect(card).to_contain_text("turn 2 · writing…")
    expect(card.locator("pre")).not_to_contain_text("Looking the order up.")  # the current turn only
    expect(live_page.locator("#llm-streams pre")).to_contain_text("token")
    screenshot(page, "agent-turn-streaming")
    screenshot(live_page, "agent-turn-streaming-live")

    assert wait_finished(run).status == "succeeded"
    expect(page.locator("#node-detail .cardhead .badge")).to_have_text("succeeded")
    expect(page.locator("#agent-steps .agent-step")).to_have_count(3)
    expect(page.locator("#agent-steps .agent-step").last).to_contain_text("token39")
    expect(turn).to_be_hidden()  # the turn is a recorded step now: the timeline shows it
    expect(card).to_contain_text("turn 2 · recorded · done")
    screenshot(page, "agent-turn-recorded")


def test_a_tool_call_shows_on_the_run_page_while_the_model_is_still_writing_it(
    agent_runtime: Runtime, agent_llm: FakeLLMServer, page_as: Any, live_url: str, screenshot: Any
) -> None:
    agent_llm.chunk_delay = 0.1
    order = "A-" + "7" * 800  # arguments in 8-character pieces: a call written over ~10 s
    agent_llm.reply = scripted(
        completion(None, ("demo__lookup_order", {"order_id": order})), completion("Done.")
    )
    config = {"prompt": "Where is my order?", "tools": ["demo.lookup_order"], "timeout_seconds": 120}
    workflow = publish("agent-calls", {"nodes": [{"id": "agent", "handler": "llm.agent", "config": config}]})
    page: Page = page_as("viewer")
    run, _ = runs.start_run(workflow, {})
    page.goto(f"{live_url}/runs/{run.pk}/")
    page.locator('#run-graph [data-node="agent"]').click()

    turn = page.locator('#node-detail [data-agent-live="agent"]')
    expect(turn.locator("[data-live-state]")).to_contain_text("writing tool calls: demo__lookup_order")
    call = turn.locator("[data-live-calls] li")
    expect(call).to_have_count(1)
    expect(call).to_contain_text('demo__lookup_order({"order_id": "A-777')
    assert not AgentStep.objects.filter(node_run__run=run, seq=1).exists(), "the turn is not recorded yet"
    screenshot(page, "agent-tool-call-writing")

    assert wait_finished(run).status == "succeeded"
    expect(turn).to_be_hidden()
    expect(page.locator("#agent-steps .agent-step")).to_have_count(3)


def test_the_editor_offers_an_agents_tools_as_choices_and_saves_them(
    page_as: Any, live_url: str, screenshot: Any
) -> None:
    from tests.browser.editor_fixtures import open_editor, select_node
    from tests.factories import make_workflow
    from workflows.store.models import WorkflowVersion

    agent = {
        "id": "agent",
        "handler": "llm.agent",
        "config": {"prompt": "Help.", "tools": ["demo.get_weather"]},
    }
    make_workflow("agent-edit", {"nodes": [agent]}, publish=False)
    page: Page = page_as("editor")
    open_editor(page, live_url, "agent-edit")
    select_node(page, "agent")
    tools = page.locator('[data-field="config.tools"]')
    expect(tools.locator("label.ed-check")).to_have_text(
        ["demo.calculator", "demo.get_weather", "demo.lookup_order"]
    )
    expect(tools.get_by_label("demo.get_weather")).to_be_checked()
    tools.get_by_label("demo.lookup_order").check()
    expect(page.locator("#ed-problems")).to_have_attribute("data-count", "0")
    screenshot(page, "agent-tools")
    page.click('[data-cmd="save"]')
    expect(page.locator("#ed-status")).to_contain_text("Saved")
    saved = (
        WorkflowVersion.objects.filter(workflow__slug="agent-edit").order_by("-number", "-revision").first()
    )
    assert saved is not None
    assert saved.definition["nodes"][0]["config"]["tools"] == ["demo.get_weather", "demo.lookup_order"]
