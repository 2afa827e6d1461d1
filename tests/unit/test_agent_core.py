"""The agent loop's decisions over recorded steps (core/agent.py): pure, milliseconds."""

from __future__ import annotations

import pytest

from workflows.core import agent as core
from workflows.core.agent import Call, CallModel, CallTool, Finish, OutOfSteps, Step
from workflows.handlers.registry import Handler, Registry, Tool

A = Call("c1", "demo__lookup_order", '{"order_id": "A-1001"}')
B = Call("c2", "demo__get_weather", '{"city": "Lisbon"}')
OPENING = core.opening_messages("Be brief.", "Where is A-1001?")


def turn(seq: int, *calls: Call, content: str = "") -> Step:
    return Step(seq, core.TURN, content=content, calls=calls)


def tool(seq: int, call: Call, status: str = core.OK, **fields: object) -> Step:
    return Step(seq, core.TOOL, status=status, call_id=call.id, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ([], CallModel(1)),
        ([turn(1, A, B)], CallTool(A, 1, 0)),
        ([turn(1, A, B), tool(2, A)], CallTool(B, 1, 1)),
        ([turn(1, A, B), tool(2, A), tool(3, B)], CallModel(2)),
        ([turn(1, A), tool(2, A), turn(3, content="It ships Monday.")], Finish("It ships Monday.", "stop")),
        # a failed step is history only: the call is made again
        ([turn(1, A), tool(2, A, core.FAILED)], CallTool(A, 1, 0)),
        ([Step(1, core.TURN, status=core.FAILED)], CallModel(1)),
        # an error told to the model counts as the call's answer
        ([turn(1, A), tool(2, A, core.ERROR, error="unknown tool")], CallModel(2)),
        # steps are read in seq order whatever order they come in
        ([tool(2, A), turn(1, A)], CallModel(2)),
    ],
)
def test_next_move_continues_after_the_last_finished_step(steps: list[Step], expected: core.Move) -> None:
    assert core.next_move(steps, max_steps=5) == expected


def test_max_steps_counts_model_turns_and_fails_or_finishes() -> None:
    steps = [turn(1, A), tool(2, A), turn(3, B, content="still looking"), tool(4, B)]
    assert core.next_move(steps, max_steps=2) == OutOfSteps(2)
    assert core.next_move(steps, max_steps=2, on_max_steps=core.FINISH) == Finish(
        "still looking", "max_steps"
    )
    assert core.next_move(steps, max_steps=3) == CallModel(3)


def test_conversation_replays_the_recorded_turns_and_tool_results() -> None:
    steps = [
        turn(1, A),
        tool(2, A, result={"status": "shipped"}),
        turn(3, B),
        tool(4, B, core.ERROR, error="no such city"),
        Step(5, core.TURN, status=core.FAILED),
    ]
    messages = core.conversation(OPENING, steps)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert messages[2]["tool_calls"][0] == {
        "id": "c1",
        "type": "function",
        "function": {"name": "demo__lookup_order", "arguments": '{"order_id": "A-1001"}'},
    }
    assert messages[3] == {"role": "tool", "tool_call_id": "c1", "content": '{"status": "shipped"}'}
    assert messages[5]["content"] == "error: no such city"


def test_tool_results_and_errors_told_to_the_model_are_bounded() -> None:
    huge = tool(2, A, result="x" * (core.RESULT_CHARS * 2))
    assert len(core.tool_content(huge)) == core.RESULT_CHARS
    assert core.tool_content(huge).endswith(
        f"[{core.RESULT_CHARS * 2 - core.RESULT_CHARS} more characters cut]"
    )
    long_error = tool(2, A, core.ERROR, error="e" * 10_000)
    assert len(core.tool_content(long_error)) == core.ERROR_CHARS


SCHEMA = {
    "type": "object",
    "properties": {"order_id": {"type": "string", "pattern": "^[A-Z]-[0-9]+$"}},
    "required": ["order_id"],
    "additionalProperties": False,
}
ALLOWED = {"demo__lookup_order": {"handler": "demo.lookup_order", "schema": SCHEMA}}


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (A, ("demo.lookup_order", {"order_id": "A-1001"})),
        (
            Call("x", "os__system", "{}"),
            "unknown tool 'os__system'; the tools you may call are: demo__lookup_order.",
        ),
        (Call("x", "demo__lookup_order", "{oops"), "the arguments of demo__lookup_order are not JSON"),
        (
            Call("x", "demo__lookup_order", "[1]"),
            "the arguments of demo__lookup_order must be a JSON object.",
        ),
        (Call("x", "demo__lookup_order", '{"order_id": 7}'), "arguments.order_id: 7 is not of type 'string'"),
        (Call("x", "demo__lookup_order", "{}"), "arguments: 'order_id' is a required property"),
    ],
)
def test_check_call_refuses_unknown_tools_and_bad_arguments_with_a_reason(
    call: Call, expected: tuple[str, dict[str, str]] | str
) -> None:
    checked = core.check_call(call, ALLOWED)
    if isinstance(expected, str):
        assert isinstance(checked, str) and expected in checked
    else:
        assert checked == expected


def test_the_fingerprint_changes_with_what_the_loop_starts_from() -> None:
    base = core.fingerprint("demo", "m", OPENING, ["a", "b"])
    assert base == core.fingerprint("demo", "m", OPENING, ["b", "a"])
    assert base != core.fingerprint(
        "demo", "m", core.opening_messages("Be brief.", "Where is A-1002?"), ["a", "b"]
    )
    assert base != core.fingerprint("demo", "other", OPENING, ["a", "b"])


def test_tool_idempotency_keys_name_the_turn_and_the_call() -> None:
    assert CallTool(B, 7, 1).key(42, "agent") == "42:agent:tool:7.1"


def test_a_tool_needs_an_arguments_schema_and_the_agent_schema_follows_registrations() -> None:
    registry = Registry()

    def documented(ctx: object) -> None:
        """Doc."""

    with pytest.raises(TypeError, match="a tool needs a config_schema"):
        registry.node("t.bad", tool=True)(documented)
    registry.node(
        "llm.agent", schema_from=lambda hs: core.agent_schema(sorted(n for n, h in hs.items() if h.tool))
    )(documented)
    assert registry.get("llm.agent").config_schema["properties"]["tools"]["items"]["enum"] == []  # type: ignore[index]
    registry.node("t.one", config_schema=SCHEMA, tool=Tool(timeout_seconds=3))(documented)
    registry.add(Handler("t.plain", documented, "Doc.", SCHEMA))
    assert list(registry.tools()) == ["t.one"] and registry.get("t.one").tool == Tool(3, 2)
    assert registry.get("llm.agent").config_schema["properties"]["tools"]["items"]["enum"] == ["t.one"]  # type: ignore[index]


def test_a_definition_naming_a_tool_that_is_not_registered_as_one_is_refused_naming_it() -> None:
    from workflows import handlers
    from workflows.core.definition import validate_definition

    config = {"prompt": "x", "tools": ["demo.get_weather", "core.echo"]}
    issues = validate_definition(
        {"nodes": [{"id": "a", "handler": "llm.agent", "config": config}]}, handlers.schemas()
    )
    assert [(i.path, i.code) for i in issues] == [("nodes[0].config.tools[1]", "invalid_config")]
    assert "'core.echo' is not one of" in issues[0].message
