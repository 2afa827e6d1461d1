"""Tool calls assembled from a stream's pieces (core/toolcalls.py): pure, milliseconds."""

from __future__ import annotations

import json
from typing import Any

import pytest

from workflows.core.toolcalls import MalformedToolCall, ToolCalls
from workflows.llm.demo_server import completion_chunks

WEATHER = {
    "id": "call_a",
    "type": "function",
    "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
}
ORDER = {
    "id": "call_b",
    "type": "function",
    "function": {"name": "lookup_order", "arguments": '{"order_id": "A-1001", "full": true}'},
}
EXPECTED = [
    {"id": "call_a", "name": "weather", "arguments": {"city": "Oslo"}},
    {"id": "call_b", "name": "lookup_order", "arguments": {"order_id": "A-1001", "full": True}},
]


def assembled(pieces: list[Any]) -> list[dict[str, Any]]:
    calls = ToolCalls()
    for piece in pieces:
        calls.add(piece)
    return calls.calls()


def streamed_pieces(*whole: dict[str, Any]) -> list[Any]:
    """The tool-call pieces of the deltas the fake and demo providers stream for an answer."""
    answer = {
        "choices": [{"message": {"content": None, "tool_calls": list(whole)}, "finish_reason": "tool_calls"}]
    }
    pieces = []
    for line in completion_chunks(answer):
        data = line.decode().removeprefix("data: ").strip()
        if data != "[DONE]":
            for choice in json.loads(data)["choices"]:
                pieces += choice["delta"].get("tool_calls") or []
    return pieces


def test_two_calls_of_one_turn_streamed_in_fragments_equal_the_whole_answer() -> None:
    pieces = streamed_pieces(WEATHER, ORDER)
    assert len(pieces) > 4, "each call's arguments came in several fragments"
    assert assembled(pieces) == assembled([WEATHER, ORDER]) == EXPECTED


def test_interleaved_fragments_are_joined_per_index() -> None:
    pieces = [
        {"index": 1, "id": "call_b", "function": {"name": "lookup_order", "arguments": ""}},
        {"index": 0, "id": "call_a", "type": "function", "function": {"name": "weather"}},
        {"index": 0, "function": {"arguments": '{"ci'}},
        {"index": 1, "function": {"arguments": '{"order_id": "A-1001",'}},
        {"index": 0, "function": {"arguments": 'ty": "Oslo"}'}},
        {"index": 1, "function": {"arguments": ' "full": true}'}},
    ]
    assert assembled(pieces) == EXPECTED


def test_progress_shows_each_call_in_index_order_as_far_as_it_has_come() -> None:
    calls = ToolCalls()
    calls.add({"index": 1, "id": "call_b", "function": {"name": "lookup_order", "arguments": ""}})
    assert calls.progress() == [("lookup_order", "")]
    calls.add({"index": 0, "function": {"arguments": '{"ci'}})  # its name comes later, or never
    assert calls.progress() == [("", '{"ci'), ("lookup_order", "")]
    calls.add({"index": 0, "id": "call_a", "function": {"name": "weather", "arguments": 'ty": "Oslo"}'}})
    assert calls.progress() == [("weather", '{"city": "Oslo"}'), ("lookup_order", "")]


def test_a_repeated_name_and_id_are_fine_and_missing_ones_get_defaults() -> None:
    pieces = [
        {"index": 0, "function": {"name": "weather", "arguments": '{"city": '}},
        {"index": 0, "function": {"name": "weather", "arguments": '"Oslo"}'}},
        {"index": 2, "function": {"name": "ping"}},
    ]
    assert assembled(pieces) == [
        {"id": "call_0", "name": "weather", "arguments": {"city": "Oslo"}},
        {"id": "call_2", "name": "ping", "arguments": {}},
    ]


def test_arguments_that_are_not_json_stay_text_for_the_agent_to_tell_the_model() -> None:
    pieces = [{"index": 0, "id": "c", "function": {"name": "weather", "arguments": '{"city": '}}]
    assert assembled(pieces)[0]["arguments"] == '{"city": '


def test_whole_calls_without_index_each_start_a_new_call_and_object_arguments_are_kept() -> None:
    whole = [{"id": "x", "function": {"name": "weather", "arguments": {"city": "Oslo"}}}, ORDER]
    assert assembled(whole) == [{**EXPECTED[0], "id": "x"}, EXPECTED[1]]


@pytest.mark.parametrize(
    ("pieces", "message"),
    [
        (["weather"], "a tool call is not an object"),
        ([{"index": -1, "function": {"name": "f"}}], "tool call index -1 is not an integer"),
        ([{"index": "0", "function": {"name": "f"}}], 'tool call index "0" is not an integer'),
        ([{"index": 500, "function": {"name": "f"}}], "tool call index 500 is not an integer from 0 to 127"),
        ([{"index": 0, "function": "weather"}], "tool call 0: function is not an object"),
        ([{"index": 0, "function": {"name": 7}}], "tool call 0: function.name is not text"),
        ([{"index": 0, "id": ["x"], "function": {"name": "f"}}], "tool call 0: id is not text"),
        ([{"index": 0, "function": {"name": "f", "arguments": 3}}], "function.arguments is not text"),
        (
            [{"index": 0, "function": {"name": "weather"}}, {"index": 0, "function": {"name": "shell"}}],
            "tool call 0: function.name changed from 'weather' to \"shell\" mid-answer",
        ),
        (
            [{"index": 0, "id": "a", "function": {"name": "f"}}, {"index": 0, "id": "b"}],
            "tool call 0: id changed from 'a' to \"b\" mid-answer",
        ),
        (
            [{"index": 1, "id": "c1", "function": {"arguments": "{}"}}],
            "tool call 1 (id 'c1') has no function name",
        ),
    ],
)
def test_a_malformed_tool_call_is_refused_saying_which_and_why(pieces: list[Any], message: str) -> None:
    with pytest.raises(MalformedToolCall) as refused:
        assembled(pieces)
    assert message in str(refused.value)
