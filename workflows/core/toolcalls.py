"""Assemble a model's tool calls, from one whole answer or from a stream's pieces.

An OpenAI-compatible stream sends each tool call in pieces under `choices[0].delta.tool_calls`:
the first piece of a call carries its `index`, `id` and `function.name` (often with empty
`arguments`), the later ones the same `index` and the next fragment of `function.arguments`,
to be joined in order; pieces of several calls may interleave. A piece without `index` starts
a new call (a whole answer's calls, and providers that stream each call whole). Whole answers
go through the same assembly, so a streamed answer and the same answer in one body give the
same calls.

Malformed (`MalformedToolCall`): a piece that is not an object; an `index` that is not an
integer from 0 to MAX_CALLS - 1; a `function`, `id` or name that is not of its type; a call
whose id or name changes between its pieces; arguments that are neither text nor an object;
and, once the answer is complete, a call that never got a name. Arguments that do not parse
as JSON are not malformed here: they are kept as text, and the agent tells the model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

MAX_CALLS = 128
SHOWN_CHARS = 120


class MalformedToolCall(ValueError):
    """A tool call that cannot be assembled; the message says which and why."""


@dataclass
class Pending:
    """One call being assembled."""

    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class ToolCalls:
    """The calls of one answer, by index, as their pieces arrive."""

    pending: dict[int, Pending] = field(default_factory=dict)

    def add(self, piece: Any) -> None:
        """Merge one piece (or one whole call); raise MalformedToolCall when it cannot be."""
        if not isinstance(piece, dict):
            raise MalformedToolCall(f"a tool call is not an object: {shown(piece)}")
        index = self.index_of(piece)
        function = piece.get("function")
        if function is None:
            function = {}
        if not isinstance(function, dict):
            raise MalformedToolCall(f"tool call {index}: function is not an object: {shown(function)}")
        call = self.pending.setdefault(index, Pending())
        call.id = merged(call.id, piece.get("id"), index, "id")
        call.name = merged(call.name, function.get("name"), index, "function.name")
        call.arguments.append(argument_text(function.get("arguments"), index))

    def index_of(self, piece: dict[str, Any]) -> int:
        index = piece.get("index")
        if index is None:
            index = max(self.pending, default=-1) + 1
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < MAX_CALLS:
            raise MalformedToolCall(
                f"tool call index {shown(index)} is not an integer from 0 to {MAX_CALLS - 1}"
            )
        return index

    def progress(self) -> list[tuple[str, str]]:
        """The calls so far, in index order: (name, the arguments' text received), for a page
        to show while the answer streams in; a name may still be empty."""
        return [(call.name, "".join(call.arguments)) for _, call in sorted(self.pending.items())]

    def calls(self) -> list[dict[str, Any]]:
        """The assembled calls in index order: {"id", "name", "arguments"}, arguments parsed
        when they are JSON; raise MalformedToolCall for a call that never got a name."""
        done = []
        for index, call in sorted(self.pending.items()):
            if not call.name:
                raise MalformedToolCall(f"tool call {index} (id {call.id or 'none'!r}) has no function name")
            arguments = parsed_arguments("".join(call.arguments))
            done.append({"id": call.id or f"call_{index}", "name": call.name, "arguments": arguments})
        return done


def merged(known: str, value: Any, index: int, what: str) -> str:
    """A call's id or name, given again (the same) or for the first time."""
    if value is None or value == "":
        return known
    if not isinstance(value, str):
        raise MalformedToolCall(f"tool call {index}: {what} is not text: {shown(value)}")
    if known and value != known:
        raise MalformedToolCall(
            f"tool call {index}: {what} changed from {known!r} to {shown(value)} mid-answer"
        )
    return value


def argument_text(value: Any, index: int) -> str:
    """A fragment of a call's arguments (an object, from a whole answer, as its JSON)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return json.dumps(value)
    raise MalformedToolCall(f"tool call {index}: function.arguments is not text: {shown(value)}")


def parsed_arguments(raw: str) -> Any:
    """Tool arguments as JSON when they parse (an empty string is no arguments), else the text."""
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"
