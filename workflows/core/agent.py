"""The agent loop (`llm.agent`) as pure decisions over its recorded steps.

Pure: standard library and jsonschema. An agent node talks to a model in turns; a turn that
asks for tools is followed by one tool step per call, in the order the model gave them,
then the next turn; a turn that asks for none ends the loop with its text.

Every finished step is recorded (workflows/agents/steps.py, the AgentStep table) under the node's
row, numbered by `seq` across all its attempts. An attempt starts by reading what the
earlier attempts recorded and asks `next_move` what comes next, so a retry, a worker killed
mid-loop or a dead-letter replay picks up after the last finished step: no finished turn is
asked again, no finished tool call is made again. Only steps with the same `fingerprint`
(the model, the rendered messages, the tools offered) count: a replay with edited input
starts a fresh loop, its steps numbered after the old ones.

A step is `ok`, `error` (a tool call that failed in a way the model should hear of: an
unknown tool, arguments off the schema, a HandlerError; the message goes back to the model
as the tool's result, bounded to ERROR_CHARS) or `failed` (the step did not finish: a
provider error, a timeout; the attempt fails with it, and the step is history only).

`max_steps` bounds the model turns of one loop (over every attempt). A loop that needs one
more turn past it stops: the node fails with a message saying so, or (`on_max_steps:
finish`) succeeds with `finish_reason: "max_steps"` and the last text.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema

from workflows.core.callhash import CACHE_SCHEMA
from workflows.core.children import SLUG_PATTERN
from workflows.core.graph import AGENT

__all__ = ["AGENT"]
TURN, TOOL = "turn", "tool"
OK, ERROR, FAILED = "ok", "error", "failed"
WAITING = "waiting"  # a workflow tool's call whose child run has not ended yet
WORKFLOW_PREFIX = "workflow:"  # a workflow tool's name in the step log (the handler's, for others)
MCP_PREFIX = "mcp:"  # an MCP tool's name in the step log: mcp:<server>/<tool>
MCP_SERVER_PATTERN = "^[a-z0-9][a-z0-9_-]{0,39}$"
FAIL, FINISH = "fail", "finish"
MAX_STEPS_LIMIT = 100
ERROR_CHARS = 2000  # what the model is told of a refused or failed tool call
RESULT_CHARS = 16_000  # what the model is given of a tool's output


def agent_schema(tool_names: Sequence[str]) -> dict[str, Any]:
    """The config schema of `llm.agent`, offering the tools registered now."""
    return {
        "type": "object",
        "properties": {
            "provider": {
                "type": "string",
                "maxLength": 100,
                "description": "The LLM provider (default: the default provider).",
            },
            "model": {
                "type": "string",
                "minLength": 1,
                "maxLength": 200,
                "description": "Default: the provider's.",
            },
            "system": {"type": "string", "maxLength": 200_000, "description": "System message (a template)."},
            "prompt": {
                "type": "string",
                "minLength": 1,
                "maxLength": 200_000,
                "description": "The task; {input.key} and {upstream.node.key} are filled in.",
            },
            "tools": {
                "type": "array",
                "items": {"enum": list(tool_names)},
                "uniqueItems": True,
                "maxItems": 64,
                "description": "The tools it may call: " + (", ".join(tool_names) or "none registered") + ".",
            },
            "workflow_tools": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": 100, "pattern": SLUG_PATTERN},
                "uniqueItems": True,
                "maxItems": 16,
                "x-picker": "workflows",
                "description": "Published workflows it may call as tools, each a child run: "
                "named and described by the workflow, its arguments the workflow's input_schema.",
            },
            "mcp_tools": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "server": {"type": "string", "pattern": MCP_SERVER_PATTERN},
                        "tools": {
                            "type": "array",
                            "items": {"type": "string", "minLength": 1, "maxLength": 128},
                            "uniqueItems": True,
                            "minItems": 1,
                            "maxItems": 64,
                        },
                    },
                    "required": ["server", "tools"],
                    "additionalProperties": False,
                },
                "maxItems": 16,
                "x-picker": "mcp-tools",
                "description": "Tools of registered MCP servers it may call: [{server, tools: [names]}].",
            },
            "max_steps": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_STEPS_LIMIT,
                "default": 10,
                "description": "Most model turns; a loop needing more fails (or finishes, see on_max_steps).",
            },
            "on_max_steps": {"enum": [FAIL, FINISH], "default": FAIL},
            "cache": {
                **CACHE_SCHEMA,
                "description": "Answer a turn identical to one within the TTL from the cache.",
            },
            "timeout_seconds": {
                "type": "number",
                "exclusiveMinimum": 0,
                "maximum": 3600,
                "description": "Per model call; tools use their own. The node's timeout bounds the loop.",
            },
            "temperature": {"type": "number", "minimum": 0, "maximum": 2},
            "max_tokens": {"type": "integer", "minimum": 1, "maximum": 1_000_000},
        },
        "required": ["prompt"],
        "additionalProperties": False,
    }


@dataclass(frozen=True)
class Call:
    """One tool call a turn asked for; `arguments` as the model sent them (JSON text)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Step:
    """A recorded step, as the loop needs it."""

    seq: int
    kind: str
    status: str = OK
    content: str = ""  # turn: the model's text
    calls: tuple[Call, ...] = ()  # turn: the tool calls it asked for
    call_id: str = ""  # tool: the call it answers
    result: Any = None  # tool: the handler's output
    error: str = ""  # tool with status error: what the model is told
    input_tokens: int = 0  # turn
    output_tokens: int = 0  # turn


@dataclass(frozen=True)
class CallModel:
    turn: int  # 1-based: the how-many-th turn of this loop


@dataclass(frozen=True)
class CallTool:
    call: Call
    turn_seq: int
    index: int  # the call's place in its turn

    def key(self, run_id: int, node_id: str) -> str:
        """The tool call's idempotency key: the same in every attempt that makes it."""
        return f"{run_id}:{node_id}:tool:{self.turn_seq}.{self.index}"


@dataclass(frozen=True)
class Finish:
    content: str
    reason: str  # "stop", or "max_steps"


@dataclass(frozen=True)
class OutOfSteps:
    turns: int


Move = CallModel | CallTool | Finish | OutOfSteps


def counted(steps: Sequence[Step]) -> list[Step]:
    """The steps a loop continues from: finished ones (ok or error), in order."""
    return sorted((s for s in steps if s.status in (OK, ERROR)), key=lambda s: s.seq)


def next_move(steps: Sequence[Step], max_steps: int, on_max_steps: str = FAIL) -> Move:
    """Decide what the loop does next from its finished steps (see the module docstring)."""
    done = counted(steps)
    turns = [s for s in done if s.kind == TURN]
    if not turns:
        return CallModel(1)
    last = turns[-1]
    if not last.calls:
        return Finish(last.content, "stop")
    answered = {s.call_id for s in done if s.kind == TOOL and s.seq > last.seq}
    for index, call in enumerate(last.calls):
        if call.id not in answered:
            return CallTool(call, last.seq, index)
    if len(turns) < max_steps:
        return CallModel(len(turns) + 1)
    return Finish(last.content, "max_steps") if on_max_steps == FINISH else OutOfSteps(len(turns))


def conversation(opening: Sequence[Mapping[str, Any]], steps: Sequence[Step]) -> list[dict[str, Any]]:
    """The chat messages of the next turn: the opening, then every finished step's message."""
    messages = [dict(m) for m in opening]
    for step in counted(steps):
        messages.append(assistant_message(step) if step.kind == TURN else tool_message(step))
    return messages


def assistant_message(turn: Step) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.content or None}
    if turn.calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in turn.calls
        ]
    return message


def tool_message(step: Step) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": step.call_id, "content": tool_content(step)}


def tool_content(step: Step) -> str:
    """What the model is told of a tool step: its output as JSON (keys sorted), or its error; bounded.

    Sorted: a resumed loop reads the result back from JSONB, which reorders keys, and must
    send the model the same text as the uninterrupted loop did (`make chaos` caught a
    resumed agent quoting {"status", "order_id"} where the reference had the handler's order).
    """
    if step.status == ERROR:
        return bounded(f"error: {step.error}", ERROR_CHARS)
    text = (
        step.result
        if isinstance(step.result, str)
        else json.dumps(step.result, ensure_ascii=False, sort_keys=True)
    )
    return bounded(text, RESULT_CHARS)


def bounded(text: str, limit: int) -> str:
    """Cut `text` to `limit` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    note = f" ... [{len(text) - limit} more characters cut]"
    return text[: max(0, limit - len(note))] + note


def opening_messages(system: str, prompt: str) -> list[dict[str, Any]]:
    return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]


def tool_spec(name: str, doc: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """A tool as the chat completions API offers it (function names cannot hold dots)."""
    return {
        "type": "function",
        "function": {
            "name": function_name(name),
            "description": doc.strip()[:1024],
            "parameters": dict(schema),
        },
    }


def function_name(handler: str) -> str:
    """`demo.get_weather` -> `demo__get_weather`: OpenAI's names allow [a-zA-Z0-9_-] only."""
    return handler.replace(".", "__")


def workflow_function_name(slug: str) -> str:
    """`demo-profile` -> `workflow__demo-profile`, cut to OpenAI's 64 characters (a hash keeps
    two long slugs apart)."""
    name = f"workflow__{slug}"
    if len(name) <= 64:
        return name
    return f"{name[:55]}_{hashlib.sha256(slug.encode()).hexdigest()[:8]}"


def workflow_tool_spec(
    slug: str, title: str, description: str, schema: Mapping[str, Any] | None
) -> dict[str, Any]:
    """A workflow as a tool: named by its slug, described by its title and description, its
    arguments its published version's input_schema (any object when it has none)."""
    spec = tool_spec("", f"{title}: {description}" if description else title, schema or {"type": "object"})
    spec["function"]["name"] = workflow_function_name(slug)
    return spec


def mcp_name(server: str, tool: str) -> str:
    """An MCP tool's name in the step log: `mcp:<server>/<tool>`."""
    return f"{MCP_PREFIX}{server}/{tool}"


def mcp_tools_of(config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The (server, tool) pairs an agent's config offers, in order (`mcp_tools`)."""
    pairs = []
    for entry in config.get("mcp_tools") or ():
        if isinstance(entry, Mapping):
            pairs += [(str(entry.get("server")), str(tool)) for tool in entry.get("tools") or ()]
    return pairs


def mcp_function_name(server: str, tool: str) -> str:
    """`files`, `read-file` -> `mcp__files__read-file`: OpenAI's [a-zA-Z0-9_-], at most 64
    characters (a hash keeps two long names apart)."""
    name = "mcp__" + server + "__" + "".join(c if c.isalnum() or c in "_-" else "_" for c in tool)
    if len(name) <= 64 and name.isascii():
        return name
    digest = hashlib.sha256(f"{server}/{tool}".encode()).hexdigest()[:8]
    return f"{name.encode('ascii', 'replace').decode().replace('?', '_')[:55]}_{digest}"


def mcp_tool_spec(server: str, tool: str, description: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """An MCP server's tool as a function: its description (and server), its input schema."""
    spec = tool_spec("", f"{description} (MCP server {server})".strip(), schema)
    spec["function"]["name"] = mcp_function_name(server, tool)
    return spec


def offered_names(config: Mapping[str, Any]) -> list[str]:
    """What an agent's config offers, as the step log names tools: handlers, workflows, MCP tools."""
    handlers = [str(name) for name in config.get("tools") or ()]
    workflows = [WORKFLOW_PREFIX + str(slug) for slug in config.get("workflow_tools") or ()]
    return handlers + workflows + [mcp_name(server, tool) for server, tool in mcp_tools_of(config)]


def fingerprint(provider: str, model: str, opening: Sequence[Mapping[str, Any]], tools: Sequence[str]) -> str:
    """Identify a loop by what it starts from: its steps count only for the same one."""
    text = json.dumps([provider, model, list(opening), sorted(tools)], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def check_call(call: Call, allowed: Mapping[str, Mapping[str, Any]]) -> tuple[str, dict[str, Any]] | str:
    """Return (handler name, arguments) for a call the agent may make, else why not.

    `allowed` maps the function names offered to the model to (handler name, schema) pairs
    as {"handler": ..., "schema": ...}.
    """
    offered = allowed.get(call.name)
    if offered is None:
        names = ", ".join(sorted(allowed)) or "none"
        return f"unknown tool {bounded(call.name, 100)!r}; the tools you may call are: {names}."
    try:
        arguments = json.loads(call.arguments or "{}")
    except ValueError as exc:
        return f"the arguments of {call.name} are not JSON ({exc}); send a JSON object."
    if not isinstance(arguments, dict):
        return f"the arguments of {call.name} must be a JSON object."
    problems = sorted(
        jsonschema.Draft202012Validator(offered["schema"]).iter_errors(arguments),
        key=lambda e: [str(p) for p in e.absolute_path],
    )
    if problems:
        said = "; ".join(f"{_path(e.absolute_path)}: {e.message}" for e in problems[:5])
        return f"the arguments of {call.name} do not match its schema: {said}."
    return str(offered["handler"]), arguments


def _path(parts: Any) -> str:
    return "arguments" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)
