"""The agent trace's tree (workflows/agents/tree.py), from step rows held in memory: one
numbering (turns 1, 2, 3; tool calls 2.1, 2.2), the messages each turn sent rebuilt from
what each turn added, and each turn's LLM call found by its step."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from workflows.agents.tree import build, numbers
from workflows.store.models import AgentStep, LLMCall

T0 = datetime(2026, 11, 27, 8, 0, tzinfo=UTC)
OPENING = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Where is A-1?"}]


def step(
    seq: int, kind: str, attempt: int = 1, status: str = "ok", loop: str = "f1", **fields: Any
) -> AgentStep:
    start = T0 + timedelta(seconds=seq)
    return AgentStep(
        seq=seq,
        attempt=attempt,
        kind=kind,
        status=status,
        fingerprint=loop,
        idempotency_key=f"k{seq}",
        started_at=start,
        finished_at=start + timedelta(milliseconds=500),
        **fields,
    )


def turn(seq: int, added: list[dict[str, Any]], count: int, calls: list[str] = (), **kw: Any) -> AgentStep:  # type: ignore[assignment]
    response = {"content": "", "tool_calls": [{"id": c, "name": "lookup", "arguments": "{}"} for c in calls]}
    return step(seq, "turn", request={"messages": added, "message_count": count}, response=response, **kw)


def tool(seq: int, turn_seq: int, call: str, **kw: Any) -> AgentStep:
    return step(
        seq, "tool", turn_seq=turn_seq, call_id=call, tool="demo.lookup", arguments={}, result={"ok": 1}, **kw
    )


ANSWER = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}],
}
RESULTS = [
    {"role": "tool", "tool_call_id": "c1", "content": "{}"},
    {"role": "tool", "tool_call_id": "c2", "content": "{}"},
]
LOOP = [
    turn(1, OPENING, 2, ["c1", "c2"]),
    tool(2, 1, "c1"),
    tool(3, 1, "c2"),
    turn(4, [ANSWER, *RESULTS], 5, status="failed"),  # attempt 1 fails on turn 2
    turn(5, [ANSWER, *RESULTS], 5, attempt=2),  # attempt 2 asks turn 2 again
]


def test_turns_and_their_tool_calls_share_one_numbering_a_failed_turn_asked_again_keeps_its_number() -> None:
    turns = build(LOOP)
    assert [(t.number, t.step.seq, t.step.status) for t in turns] == [
        (1, 1, "ok"),
        (2, 4, "failed"),
        (2, 5, "ok"),
    ]
    assert [c.number for c in turns[0].tools] == ["1.1", "1.2"]
    assert numbers(LOOP) == {1: "1", 2: "1.1", 3: "1.2", 4: "2", 5: "2"}


def test_each_turn_sent_the_earlier_turns_messages_then_its_own() -> None:
    first, _, second = build(LOOP)
    assert [m.role for m in first.added] == ["system", "user"] and not first.context
    assert [m.role for m in second.context] == ["system", "user"]
    assert [m.role for m in second.added] == ["assistant", "tool", "tool"]
    assert second.added[0].tool_calls == [{"name": "lookup", "arguments": "{}"}]
    assert second.complete and second.sent_count == 5
    broken = build([turn(1, OPENING, 2), turn(2, [ANSWER], 4)])[1]  # a message missing from the log
    assert not broken.complete and broken.sent_count == 4


def test_a_new_conversation_numbers_from_one_and_says_so() -> None:
    turns = build([*LOOP, turn(6, OPENING, 2, loop="f2", attempt=3)])
    assert [(t.number, t.first_of_loop) for t in turns] == [(1, True), (2, False), (2, False), (1, True)]
    assert not turns[-1].context


def test_a_turn_finds_its_llm_call_by_attempt_and_step() -> None:
    calls = [
        LLMCall(attempt=1, step="turn 4", latency_ms=900.0, first_token_ms=120.0),
        LLMCall(attempt=2, step="turn 5", latency_ms=300.0, first_token_ms=40.0),
    ]
    turns = build(LOOP, calls)
    assert turns[0].call is None
    assert turns[1].call is calls[0] and turns[2].call is calls[1]


def test_a_long_message_is_collapsed_to_its_first_line() -> None:
    long = {"role": "system", "content": "First line.\n" + "more\n" * 10}
    message = build([turn(1, [long], 1)])[0].added[0]
    assert message.is_long and message.preview == "First line."
