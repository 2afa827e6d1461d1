"""An agent node's loop as a tree, the way the run page shows it: turns, and their tool calls.

Each model turn carries the exact messages it sent, its answer and its LLM call (time to
first token, latency, tokens, cost); each tool call sits under the turn that asked for it,
with its arguments, result, duration, error and the child run it started.

One numbering everywhere: turns count 1, 2, 3 within their loop, and a turn's tool calls
are numbered after it (2.1, 2.2). The step's `seq` (which counts turns and tool calls
together across attempts) stays as the step's id, in a title, never as its name; the LLM
calls table and the live stream use the same turn numbers.

The messages a turn sent are rebuilt from the step log: a turn records only the messages it
added to the previous turn's (its `request.messages`, with the full `message_count`), so
the whole conversation is every earlier finished turn's additions of the same loop, then
its own. A loop starts again (numbering from 1) when its fingerprint changes: a replay with
edited input, a new model or new tools make a new conversation.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from workflows.agents.steps import child_run_of, timeline
from workflows.core import agent
from workflows.store.models import AgentStep, LLMCall, Run

LONG_MESSAGE = 600  # characters: a longer message (or one of more than LONG_LINES lines) is collapsed
LONG_LINES = 8


@dataclass(frozen=True)
class Message:
    """One chat message as sent: its role, its text, the tool calls of an assistant message."""

    role: str
    content: str
    tool_calls: list[dict[str, Any]]
    tool_call_id: str
    new: bool  # first sent by this turn (else: context repeated from earlier turns)

    @property
    def is_long(self) -> bool:
        return len(self.content) > LONG_MESSAGE or self.content.count("\n") >= LONG_LINES

    @property
    def preview(self) -> str:
        line = self.content.strip().split("\n", 1)[0]
        return line if len(line) <= 160 else line[:159] + "…"


@dataclass(frozen=True)
class ToolCall:
    """A tool call under its turn: `number` is "<turn>.<k>"."""

    number: str
    step: AgentStep
    child: Run | None
    left: float  # percent of the node's step time axis
    width: float


@dataclass
class Turn:
    """A model turn: its number in its loop, what it sent, what came back, its call's figures."""

    number: int
    step: AgentStep
    messages: list[Message]
    complete: bool  # the messages rebuilt are all `message_count` the turn sent
    call: LLMCall | None
    left: float
    width: float
    first_of_loop: bool
    tools: list[ToolCall] = field(default_factory=list)

    @property
    def context(self) -> list[Message]:
        """The messages earlier turns sent too (the conversation so far)."""
        return [m for m in self.messages if not m.new]

    @property
    def added(self) -> list[Message]:
        """The messages this turn added: the opening, or the last answer and its tools' results."""
        return [m for m in self.messages if m.new]

    @property
    def sent_count(self) -> int:
        request = self.step.request or {}
        return int(request.get("message_count") or len(self.messages))


def message_of(raw: Any, new: bool) -> Message:
    raw = raw if isinstance(raw, dict) else {"role": "?", "content": raw}
    content = raw.get("content")
    text = content if isinstance(content, str) else ("" if content is None else json.dumps(content))
    calls = [
        {
            "name": str((c.get("function") or {}).get("name") or c.get("name") or ""),
            "arguments": (c.get("function") or {}).get("arguments", c.get("arguments")),
        }
        for c in raw.get("tool_calls") or ()
        if isinstance(c, dict)
    ]
    return Message(str(raw.get("role") or "?"), text, calls, str(raw.get("tool_call_id") or ""), new)


def added_messages(step: AgentStep) -> list[Any]:
    request = step.request or {}
    messages = request.get("messages")
    return list(messages) if isinstance(messages, list) else []


def calls_by_turn(calls: Iterable[LLMCall]) -> dict[tuple[int, int], LLMCall]:
    """(attempt, turn step seq) -> the LLM call that turn made (recorded as step "turn <seq>")."""
    found: dict[tuple[int, int], LLMCall] = {}
    for call in calls:
        kind, _, seq = call.step.partition(" ")
        if kind == "turn" and seq.isdigit():
            found.setdefault((call.attempt, int(seq)), call)
    return found


def build(steps: Sequence[AgentStep], calls: Iterable[LLMCall] = ()) -> list[Turn]:
    """The node's turns in order, each with its tool calls; see the module docstring."""
    by_turn = calls_by_turn(calls)
    places = {row.step.seq: row for row in timeline(list(steps))}
    turns: list[Turn] = []
    by_seq: dict[int, Turn] = {}
    context: list[Any] = []  # the messages of the loop's finished turns so far
    loop, number = "", 0
    for step in steps:
        place = places[step.seq]
        if step.kind != agent.TURN:
            attach_tool(by_seq, step, place.left, place.width)
            continue
        first = step.fingerprint != loop
        if first:
            loop, number, context = step.fingerprint, 0, []
        number += 1
        added = added_messages(step)
        sent = [message_of(m, False) for m in context] + [message_of(m, True) for m in added]
        turn = Turn(
            number,
            step,
            sent,
            len(sent) == int((step.request or {}).get("message_count") or len(sent)),
            by_turn.get((step.attempt, step.seq)),
            place.left,
            place.width,
            first,
        )
        turns.append(turn)
        by_seq[step.seq] = turn
        if step.status in (agent.OK, agent.ERROR):
            context = context + added
        else:  # a failed turn is asked again: the next one repeats its number
            number -= 1
    return turns


def attach_tool(by_seq: dict[int, Turn], step: AgentStep, left: float, width: float) -> None:
    """Put a tool call under the turn that asked for it (by `turn_seq`)."""
    turn = by_seq.get(step.turn_seq or 0)
    if turn is None:  # its turn belongs to a loop of an older fingerprint that is not shown
        return
    number = f"{turn.number}.{len(turn.tools) + 1}"
    turn.tools.append(ToolCall(number, step, child_run_of(step), left, width))


def numbers(steps: Sequence[AgentStep]) -> dict[int, str]:
    """step seq -> its name in the one numbering: "2" for a turn, "2.1" for its first tool call
    (the API's steps carry it beside their seq)."""
    found: dict[int, str] = {}
    for turn in build(steps):
        found[turn.step.seq] = str(turn.number)
        found.update({call.step.seq: call.number for call in turn.tools})
    return found
