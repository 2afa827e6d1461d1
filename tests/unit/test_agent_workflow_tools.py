"""Workflows as an agent's tools, the pure part: what is offered and named, which calls a
definition makes, and how a waiting call counts in the loop's decisions."""

from __future__ import annotations

import pytest

from workflows.core import agent as core
from workflows.core.agent import Call, CallTool, Step
from workflows.core.children import Call as WorkflowCall, calls_of
from workflows.core.states import Cause, NodeStatus as N, can_move_node

PROFILE = Call("c1", "workflow__demo-profile", "{}")


def test_a_waiting_workflow_call_is_not_an_answer_yet() -> None:
    steps = [Step(1, core.TURN, calls=(PROFILE,)), Step(2, core.TOOL, status=core.WAITING, call_id="c1")]
    assert core.next_move(steps, 5) == CallTool(PROFILE, 1, 0)
    assert [s.seq for s in core.counted(steps)] == [1]


def test_a_finished_workflow_call_is_answered_with_the_childs_output() -> None:
    steps = [
        Step(1, core.TURN, calls=(PROFILE,)),
        Step(2, core.TOOL, call_id="c1", result={"items": ["tea"]}),
    ]
    assert core.next_move(steps, 5) == core.CallModel(2)
    assert core.conversation([], steps)[-1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": '{"items": ["tea"]}',
    }


def test_a_workflow_tool_is_named_described_and_typed_by_its_workflow() -> None:
    schema = {"type": "object", "properties": {"user_id": {"type": "string"}}, "required": ["user_id"]}
    spec = core.workflow_tool_spec("demo-profile", "User profile", "Enrich a profile.", schema)
    assert spec["function"] == {
        "name": "workflow__demo-profile",
        "description": "User profile: Enrich a profile.",
        "parameters": schema,
    }
    bare = core.workflow_tool_spec("plain", "Plain", "", None)["function"]
    assert (bare["description"], bare["parameters"]) == ("Plain", {"type": "object"})


def test_long_slugs_give_distinct_function_names_within_64_characters() -> None:
    one, two = core.workflow_function_name("a" * 90 + "x"), core.workflow_function_name("a" * 90 + "y")
    assert len(one) == len(two) == 64 and one != two and one.startswith("workflow__aaa")


def test_the_fingerprint_of_a_loop_without_workflow_tools_is_unchanged() -> None:
    config = {"tools": ["demo.lookup_order"]}
    assert core.offered_names(config) == ["demo.lookup_order"]
    assert core.offered_names({**config, "workflow_tools": ["x"]}) == ["demo.lookup_order", "workflow:x"]


def test_calls_of_finds_workflow_run_nodes_and_agent_workflow_tools_with_their_fields() -> None:
    definition = {
        "nodes": [
            {"id": "call", "handler": "workflow.run", "config": {"workflow": "enrich"}},
            {"id": "agent", "handler": "llm.agent", "config": {"prompt": "p", "workflow_tools": ["a", "b"]}},
            {"id": "plain", "handler": "llm.agent", "config": {"prompt": "p", "tools": ["demo.calculator"]}},
            {"id": "odd", "handler": "llm.agent", "config": {"workflow_tools": "not a list"}},
        ]
    }
    calls = calls_of(definition)
    assert calls == [
        WorkflowCall(0, "call", "enrich", "workflow"),
        WorkflowCall(1, "agent", "a", "workflow_tools[0]"),
        WorkflowCall(1, "agent", "b", "workflow_tools[1]"),
    ]
    assert [c.is_tool for c in calls] == [False, True, True]


def test_the_agent_schema_offers_workflow_tools_with_the_workflow_picker() -> None:
    prop = core.agent_schema([])["properties"]["workflow_tools"]
    assert prop["x-picker"] == "workflows" and prop["items"]["pattern"]


@pytest.mark.parametrize(
    ("cause", "source", "target"),
    [(Cause.CALL, N.RUNNING, N.WAITING), (Cause.CHILD, N.WAITING, N.QUEUED)],
)
def test_an_agent_waits_on_its_tool_call_and_is_queued_again_by_the_table(
    cause: Cause, source: N, target: N
) -> None:
    assert can_move_node(cause, source, target)
