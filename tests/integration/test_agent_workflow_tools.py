# ruff: noqa: F811  (pytest fixtures imported from test_agent are parameters here)
"""Workflows as an agent's tools (`workflow_tools`), end to end: real workers and scheduler,
the fake provider scripted per turn, each call a child run while the agent holds no worker."""

from __future__ import annotations

import json
import signal
import threading
from typing import Any

import pytest

from tests.fakes.llm_server import FakeLLMServer
from tests.integration.conftest import node, publish, wait_finished
from tests.integration.runtime import Runtime, wait_for

# The agent tests' fixtures (the fake provider, workers that use it) and reply helpers.
from tests.integration.test_agent import agent_runtime, completion, llm, scripted  # noqa: F401
from workflows.handlers.demo import DEMO_AGENT_WORKFLOW, DEMO_PROFILE
from workflows.llm import streams
from workflows.llm.demo_server import script_reply
from workflows.runs import actions as runs
from workflows.runtime import bus
from workflows.store.errors import Invalid
from workflows.store.models import AgentStep, ChildRun, NodeRun, Run, Workflow
from workflows.versions import publish as versions
from workflows.waits import waiting as waits

LOOKUP_SCHEMA = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}},
    "required": ["order_id"],
    "additionalProperties": False,
}
LOOKUP = {"input_schema": LOOKUP_SCHEMA, "nodes": [node("look", "core.echo")]}


def agent_flow(*slugs: str, max_attempts: int = 1) -> dict[str, Any]:
    agent = {
        "id": "agent",
        "handler": "llm.agent",
        "config": {"prompt": "Help {input.who}.", "workflow_tools": list(slugs)},
        "retry": {"max_attempts": max_attempts, "backoff_seconds": 0.1},
    }
    return {"nodes": [agent, node("after", "core.echo")], "edges": [{"source": "agent", "target": "after"}]}


def tool_messages(request: Any) -> list[str]:
    return [m["content"] for m in request.json["messages"] if m["role"] == "tool"]


def agent_node(run: Run) -> NodeRun:
    return NodeRun.objects.get(run=run, node_id="agent")


def test_a_workflow_tool_runs_its_child_once_without_a_worker_and_its_output_reaches_the_model(
    agent_runtime: Runtime, llm: FakeLLMServer
) -> None:
    publish("lookup", {**LOOKUP, "nodes": [node("hold", "wait.event", config={"key": "input.order_id"})]})
    llm.reply = scripted(
        completion(None, ("workflow__lookup", {"order_id": "A-7"})), completion("It ships Monday.")
    )
    run, _ = runs.start_run(publish("helper", agent_flow("lookup")), {"who": "ana"})

    # While the child waits on its event the agent waits too: no worker, no job.
    link = wait_for(lambda: ChildRun.objects.filter(parent_run=run).first(), 30, "the child run")
    wait_for(lambda: agent_node(run).status == "waiting", 30, "the agent to wait")
    assert (agent_node(run).job_id, Run.objects.get(pk=run.pk).waiting_nodes) == ("", 1)
    step = AgentStep.objects.get(pk=link.agent_step_id)
    assert (step.kind, step.status, step.tool, step.arguments) == (
        "tool",
        "waiting",
        "workflow:lookup",
        {"order_id": "A-7"},
    )
    assert link.child.idempotency_key == f"parent:{run.pk}:agent:tool:1.0" == f"parent:{step.idempotency_key}"
    assert link.child.input == {"order_id": "A-7"} and link.node_id == "agent"
    wait_for(
        lambda: NodeRun.objects.filter(run=link.child, status="waiting").exists(), 30, "the child's wait"
    )
    waits.post_event("A-7", {"eta": "Monday"})

    assert wait_finished(run).status == "succeeded"
    link.refresh_from_db()
    child_output = NodeRun.objects.get(run=link.child, node_id="hold").output
    assert link.child.status == "succeeded" and link.settled_at is not None
    assert tool_messages(llm.requests[1]) == [json.dumps(child_output, ensure_ascii=False, sort_keys=True)]
    offered = llm.requests[0].json["tools"][0]["function"]
    assert offered == {"name": "workflow__lookup", "description": "Lookup", "parameters": LOOKUP_SCHEMA}
    step.refresh_from_db()
    assert (step.status, step.result) == ("ok", child_output)
    node_run = agent_node(run)
    assert (node_run.attempt, node_run.tries) == (1, 1), "a call spends no retry"
    assert node_run.output["content"] == "It ships Monday." and node_run.output["tool_calls"] == 1
    assert len(llm.requests) == 2 and ChildRun.objects.filter(parent_run=run).count() == 1
    assert Run.objects.get(pk=run.pk).waiting_nodes == 0
    # The attempt's text stream went on after the wait: its pieces lie end to end.
    pieces = [streams.parse_entry(i, f) for i, f in bus.client().xrange(streams.text_key(node_run.pk, 1))]
    texts = [p for p in pieces if p.text]
    assert [p.offset for p in texts] == [sum(len(q.text) for q in texts[:k]) for k in range(len(texts))]
    assert "It ships Monday." in "".join(p.text for p in texts)


def test_workflow_calls_of_one_turn_run_side_by_side_and_the_agent_goes_on_when_the_last_ends(
    agent_runtime: Runtime, llm: FakeLLMServer
) -> None:
    publish("lookup", {**LOOKUP, "nodes": [node("hold", "wait.event", config={"key": "input.order_id"})]})
    orders = ["A-1", "A-2", "A-3"]
    llm.reply = scripted(
        completion(None, *(("workflow__lookup", {"order_id": order}) for order in orders)),
        completion("All three ship Monday."),
    )
    run, _ = runs.start_run(publish("helper", agent_flow("lookup")), {"who": "ana"})

    def children_waiting() -> bool:
        return NodeRun.objects.filter(run__parent_link__parent_run=run, status="waiting").count() == 3

    wait_for(children_waiting, 30, "the three children to wait on their events, all at once")
    assert agent_node(run).status == "waiting"
    links = list(ChildRun.objects.filter(parent_run=run).order_by("agent_step__seq"))
    assert [link.child.input["order_id"] for link in links] == orders
    assert [link.child.idempotency_key for link in links] == [
        f"parent:{run.pk}:agent:tool:1.{i}" for i in range(3)
    ]

    waits.post_event("A-1", {"eta": "Monday"})
    wait_for(
        lambda: ChildRun.objects.filter(pk=links[0].pk, settled_at__isnull=False).exists(), 30, "A-1 settled"
    )
    statuses = list(
        AgentStep.objects.filter(node_run__run=run, kind="tool")
        .order_by("seq")
        .values_list("status", flat=True)
    )
    assert statuses == ["ok", "waiting", "waiting"] and agent_node(run).status == "waiting", "two still run"

    # The last two end at the same moment, in two transactions: the agent goes on once.
    posts = [
        threading.Thread(target=waits.post_event, args=(order, {"eta": "Monday"})) for order in orders[1:]
    ]
    for post in posts:
        post.start()
    for post in posts:
        post.join()
    assert wait_finished(run).status == "succeeded"
    assert len(llm.requests) == 2, "one turn asked for the three calls, one answered"
    assert len(tool_messages(llm.requests[1])) == 3
    assert (agent_node(run).attempt, agent_node(run).output["tool_calls"]) == (1, 3)


def test_a_failing_child_and_bad_arguments_are_told_to_the_model(
    agent_runtime: Runtime, llm: FakeLLMServer
) -> None:
    publish("lookup", LOOKUP)
    publish("charge", {"nodes": [node("pay", "core.fail", config={"message": "card declined"})]})
    llm.reply = scripted(
        completion(None, ("workflow__lookup", {"order_id": 5}), ("workflow__charge", {"amount": 3})),
        completion("I could not do it."),
    )
    run, _ = runs.start_run(publish("helper", agent_flow("lookup", "charge")), {"who": "bo"})
    assert wait_finished(run).status == "succeeded"
    (link,) = ChildRun.objects.filter(parent_run=run)
    assert link.child.workflow.slug == "charge" and link.child.status == "failed"
    told = tool_messages(llm.requests[1])
    assert "arguments.order_id: 5 is not of type 'string'" in told[0]
    assert told[1].startswith(f"error: Child run {link.child_id} of workflow 'charge' failed: ")
    assert "node 'pay' is dead after 1 attempt(s): card declined" in told[1]
    statuses = [s.status for s in AgentStep.objects.filter(node_run__run=run, kind="tool").order_by("seq")]
    assert statuses == ["error", "error"]
    assert agent_node(run).output["content"] == "I could not do it."


def test_kill_9_of_workers_and_scheduler_around_the_child_start_gives_exactly_one_child(
    agent_runtime: Runtime, llm: FakeLLMServer
) -> None:
    publish(
        "slow", {"nodes": [node("nap", "core.delay", config={"seconds": 2.0}, retry={"max_attempts": 3})]}
    )
    held, released = threading.Event(), threading.Event()

    def first_turn() -> dict[str, Any]:
        if not held.is_set():  # the first run's first turn: hold it until its worker is gone
            held.set()
            released.wait(60)
        return completion(None, ("workflow__slow", {}))

    llm.reply = scripted(first_turn, completion("Slept."))
    workflow = publish("helper", agent_flow("slow", max_attempts=5))
    first, _ = runs.start_run(workflow, {"who": "first"})
    wait_for(held.is_set, 30, "the first turn to be asked")
    agent_runtime.kill(agent_node(first).worker)  # before the call: nothing recorded yet
    released.set()
    started = [first] + [runs.start_run(workflow, {"who": f"w{i}"})[0] for i in range(4)]
    wait_for(
        lambda: NodeRun.objects.filter(run__workflow__slug="slow", status="running").exists(), 60, "a nap"
    )
    agent_runtime.kill("scheduler-1", signal.SIGKILL)
    for name in ("worker-1", "worker-2"):
        if name in agent_runtime.procs and agent_runtime.procs[name].poll() is None:
            agent_runtime.kill(name, signal.SIGKILL)
    agent_runtime.worker("worker-3")
    agent_runtime.worker("worker-4")
    agent_runtime.scheduler("scheduler-2")
    for run in started:
        assert wait_finished(run, 150).status == "succeeded"
    for run in started:
        (link,) = ChildRun.objects.filter(parent_run=run)
        assert link.child.status == "succeeded" and link.agent_step_id is not None
        assert agent_node(run).output["tool_calls"] == 1
    assert Run.objects.filter(workflow__slug="slow").count() == len(started)
    assert agent_node(first).attempt >= 2, "the attempt killed before its call was retried"


def test_cancelling_the_agents_run_cancels_its_child(agent_runtime: Runtime, llm: FakeLLMServer) -> None:
    publish("forever", {"nodes": [node("w", "wait.event", config={"key": "input.k"})]})
    llm.reply = scripted(completion(None, ("workflow__forever", {"k": "never"})), completion("unreached"))
    run, _ = runs.start_run(publish("helper", agent_flow("forever")), {"who": "cy"})
    link = wait_for(lambda: ChildRun.objects.filter(parent_run=run).first(), 30, "the child run")
    wait_for(lambda: agent_node(run).status == "waiting", 30, "the agent to wait")
    runs.cancel_run(run.pk, reason="drill")
    link.refresh_from_db()
    assert (Run.objects.get(pk=run.pk).status, link.child.status) == ("cancelled", "cancelled")
    assert agent_node(run).status == "cancelled" and link.settled_at is not None
    step = AgentStep.objects.get(pk=link.agent_step_id)
    assert step.status == "failed" and "was cancelled" in step.error
    assert len(llm.requests) == 1


# --------------------------------------------------------------------------- refused definitions


def test_unknown_paused_unpublished_and_cyclic_workflow_tools_are_refused_naming_the_field(
    transactional_db: Any,
) -> None:
    publish("held", {"nodes": [node("n")]})
    Workflow.objects.filter(slug="held").update(paused=True)
    draft_only = versions.create_workflow("draft-only", "Draft only")
    versions.create_version(draft_only, {"nodes": [node("n")]})
    parent = versions.create_workflow("parent", "Parent")
    with pytest.raises(Invalid) as refused:
        versions.create_version(parent, agent_flow("nobody", "held", "draft-only"))
    found = [(i.path, i.code, i.node) for i in refused.value.issues]
    assert found == [
        ("nodes[0].config.workflow_tools[0]", "unknown_workflow", "agent"),
        ("nodes[0].config.workflow_tools[1]", "paused_workflow", "agent"),
        ("nodes[0].config.workflow_tools[2]", "unknown_version", "agent"),
    ]
    assert "there is no workflow 'nobody' (node 'agent')" in refused.value.issues[0].message

    a = publish("a", {"nodes": [node("n")]})
    publish("b", {"nodes": [node("to_a", "workflow.run", config={"workflow": "a"})]})
    with pytest.raises(Invalid) as cycle:
        versions.create_version(a, agent_flow("b"))
    (issue,) = cycle.value.issues
    assert (issue.path, issue.code, issue.cycle) == (
        "nodes[0].config.workflow_tools[0]",
        "call_cycle",
        ("a", "b", "a"),
    )
    with pytest.raises(Invalid, match="a -> a"):
        versions.create_version(a, agent_flow("a"))


def test_the_seeded_demo_agent_workflow_works_against_the_scripted_demo_provider(
    agent_runtime: Runtime, llm: FakeLLMServer
) -> None:
    llm.reply = script_reply  # what `make run` serves as the demo provider
    publish("demo-profile", DEMO_PROFILE)
    run, _ = runs.start_run(publish("demo-agent-workflow", DEMO_AGENT_WORKFLOW), {"user_id": "u-42"})
    assert wait_finished(run).status == "succeeded"
    (link,) = ChildRun.objects.filter(parent_run=run)
    assert (link.child.workflow.slug, link.child.status, link.node_id) == (
        "demo-profile",
        "succeeded",
        "concierge",
    )
    assert link.child.input == {"user_id": "u-42"}, "the profile of the user the agent was asked about"
    concierge = NodeRun.objects.get(run=run, node_id="concierge")
    assert (concierge.output["turns"], concierge.output["tool_calls"]) == (2, 1)
    step = AgentStep.objects.get(node_run=concierge, kind="tool")
    assert (step.tool, step.status) == ("workflow:demo-profile", "ok")
    assert step.result["items"][0] in concierge.output["content"], "the answer quotes the child's output"
