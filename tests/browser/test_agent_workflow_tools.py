# ruff: noqa: F811  (pytest fixtures imported from test_agent_steps are parameters here)
"""Workflows as an agent's tools in Chromium: the timeline's call linked to its child run and
back, and the editor's agent form offering workflows with inline validation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.browser.editor_fixtures import open_editor, select_node
from tests.browser.test_agent_steps import agent_llm, agent_runtime  # noqa: F401
from tests.factories import make_workflow
from tests.fakes.llm_server import FakeLLMServer
from tests.integration.conftest import node, publish, wait_finished
from tests.integration.runtime import Runtime, wait_for
from tests.integration.test_agent import completion, scripted
from workflows.runs import actions as runs
from workflows.store.models import ChildRun, NodeRun, RunEvent, Workflow, WorkflowVersion
from workflows.waits import waiting as waits

PageAs = Callable[[str], Page]
Screenshot = Callable[[Page, str], Path]


def test_the_timeline_links_a_workflow_call_to_its_child_run_and_the_child_links_back(
    agent_runtime: Runtime, agent_llm: FakeLLMServer, page_as: PageAs, live_url: str, screenshot: Screenshot
) -> None:
    schema = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}
    publish(
        "lookup",
        {"input_schema": schema, "nodes": [node("hold", "wait.event", config={"key": "input.order_id"})]},
    )
    agent_llm.reply = scripted(
        completion(None, ("workflow__lookup", {"order_id": "A-5"})), completion("It ships on Monday.")
    )
    agent = {
        "id": "agent",
        "handler": "llm.agent",
        "config": {"prompt": "Help.", "workflow_tools": ["lookup"]},
    }
    run, _ = runs.start_run(publish("helper", {"nodes": [agent]}), {})
    link = wait_for(lambda: ChildRun.objects.filter(parent_run=run).first(), 60, "the child run")
    wait_for(
        lambda: NodeRun.objects.filter(run=run, node_id="agent", status="waiting").exists(), 30, "the wait"
    )

    page = page_as("viewer")
    page.goto(f"{live_url}/runs/{run.pk}/")
    page.locator('#run-graph [data-node="agent"]').click()
    call = page.locator("#agent-steps .agent-step.depth-1")
    expect(call).to_contain_text("workflow:lookup")
    expect(call).to_contain_text("waiting for its child run")
    expect(call.locator(f'a[data-child-run="{link.child_id}"]')).to_have_text(f"#{link.child_id}")
    child_row = page.locator('#run-family tr[data-relation="child"]')
    expect(child_row.locator(".badge")).to_have_text("running")
    trace = page.locator("#run-timeline")
    expect(trace.locator("[data-segment=wait][data-node=agent]")).to_have_count(1)  # waiting now
    # The wait starts with the child run; the parked attempt is drawn going on under it.
    wait_start = float(trace.locator("[data-segment=wait][data-node=agent]").get_attribute("data-start") or 0)
    assert abs(wait_start - link.created_at.timestamp()) < 0.002
    expect(trace.locator("[data-segment=attempt][data-node=agent]")).to_have_count(1)
    screenshot(page, "agent-workflow-call-waiting")

    waits.post_event("A-5", {"eta": "Monday"})
    assert wait_finished(run).status == "succeeded"
    expect(call).not_to_contain_text("waiting for its child run")  # the panel polled the result in
    expect(call.locator(".badge")).to_have_text("succeeded")
    expect(page.locator("#agent-steps .agent-step").last).to_contain_text("It ships on Monday.")
    # The page's live parts follow without a reload: the child's status, the run's output,
    # and the open node panel's header.
    expect(page.locator("#node-detail [data-panel-node] .badge")).to_have_text("succeeded")
    expect(child_row.locator(".badge")).to_have_text("succeeded")
    expect(page.locator("#run-output")).to_contain_text("It ships on Monday.")
    # The trace: one attempt spanning the wait for the child run, drawn over it; the queue
    # wait ends where the attempt first started, not where it was resumed.
    attempt_event = RunEvent.objects.get(run=run, node_id="agent", kind="node.attempt")
    assert attempt_event.started_at <= link.created_at, "the attempt's span covers its first job"
    # Read in one go (the trace redraws on every live message; the page may still show the
    # resumed job running for a moment): the attempt covers the wait, no queue wait after it.
    page.wait_for_function(
        """() => {
          const bar = (kind) => [...document.querySelectorAll(`#run-timeline [data-segment=${kind}][data-node=agent]`)]
            .map((r) => ({ x: +r.getAttribute("x"), end: +r.getAttribute("x") + +r.getAttribute("width") }));
          const [attempts, waits, queues] = ["attempt", "wait", "queue"].map(bar);
          if (attempts.length !== 1 || waits.length !== 1) return false;
          const [a, w] = [attempts[0], waits[0]];
          return a.x <= w.x + 1 && w.end <= a.end + 1 && queues.every((q) => q.end <= a.x + 3);
        }"""
    )
    screenshot(page, "agent-workflow-call-done")

    call.locator(f'a[data-child-run="{link.child_id}"]').click()
    page.wait_for_url(f"{live_url}/runs/{link.child_id}/")
    parent = page.locator('#run-family tr[data-relation="parent"]')
    expect(parent).to_contain_text("parent (agent tool call)")
    expect(parent).to_contain_text("agent")
    expect(parent.locator(f'a[href="/runs/{run.pk}/"]')).to_have_text(f"#{run.pk}")
    screenshot(page, "agent-workflow-child")


def test_the_editor_offers_workflows_as_an_agents_tools_and_refuses_a_paused_one_inline(
    page_as: PageAs, live_url: str, screenshot: Screenshot
) -> None:
    make_workflow("lookup", {"nodes": [node("n")]})
    make_workflow("held", {"nodes": [node("n")]})
    Workflow.objects.filter(slug="held").update(paused=True)
    agent = {"id": "agent", "handler": "llm.agent", "config": {"prompt": "Help."}}
    make_workflow("agent-edit", {"nodes": [agent]}, publish=False)
    page = page_as("editor")
    open_editor(page, live_url, "agent-edit")
    select_node(page, "agent")
    offered = page.locator('[data-field="config.workflow_tools"]')
    expect(offered.locator("label.ed-check")).to_have_text(["held — Held (paused)", "lookup — Lookup"])
    offered.get_by_label("held — Held (paused)").check()
    offered.get_by_label("lookup — Lookup").check()
    expect(offered).to_contain_text("workflow 'held' is paused")  # the server's issue, by its field
    screenshot(page, "agent-workflow-tools-refused")
    offered.get_by_label("held — Held (paused)").uncheck()
    expect(page.locator("#ed-problems")).to_have_attribute("data-count", "0")
    page.click('[data-cmd="save"]')
    expect(page.locator("#ed-status")).to_contain_text("Saved")
    saved = (
        WorkflowVersion.objects.filter(workflow__slug="agent-edit").order_by("-number", "-revision").first()
    )
    assert saved is not None and saved.definition["nodes"][0]["config"]["workflow_tools"] == ["lookup"]
    screenshot(page, "agent-workflow-tools")
