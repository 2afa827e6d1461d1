"""Run an `llm.agent` node's attempt in a worker: its turns and tool calls, each a durable step.

The decisions are the core's (core/agent.py: what comes next, the messages, the checks of a
tool call); the steps are stored by workflows/agents/steps.py; this module makes the calls. The
attempt runs under its node's time limit like any task; each model call has the node's
`timeout_seconds` (cut to what is left of the attempt), each tool call its handler's
`Tool.timeout_seconds` and up to `Tool.max_attempts` tries within the attempt. Model turns
stream into the attempt's text stream (llm/streams.py), each between two `turn` markers.

How a tool call can end:
- ok: its output (JSON) is the tool's result;
- error, told to the model as the result (bounded): an unknown tool, arguments that are not
  JSON or off the tool's schema, a HandlerError (the tool's own explanation, e.g. "no such
  order": the model can do something about it);
- an MCP tool (`mcp_tools`, workflows/mcp/calls.py) ends ok with its result, or with an error
  told to the model for every way it can go wrong (server down, slow, malformed JSON-RPC,
  the tool's own error, a result over the limit): one try, bounded by the server's timeout;
- waiting: a workflow tool (`workflow_tools`, workflows/agents/tools.py) started its child run
  and the attempt waits for it, holding no worker (`Parked`); the child's end gives the step
  its result (ok, or an error told to the model) and queues the attempt to go on;
- failed: a timeout or an unexpected exception on every try. The attempt fails with it and
  the node is retried per its policy; the next attempt makes the call again (same
  idempotency key), after every step already finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone

from workflows import handlers
from workflows.agents import steps as agents, tools as agenttools
from workflows.children import start as children
from workflows.core import agent as core, callhash
from workflows.core.graph import Node
from workflows.handlers.builtin import time_budget
from workflows.llm import client, providers, replays, streams, usage
from workflows.llm.handler import (
    acall_recorded,
    admit_call,
    call_recorded,
    chat_messages,
    recheck_call,
    resolve_for,
    trace_headers,
)
from workflows.mcp import calls as mcpcalls, catalog as mcpcatalog
from workflows.runtime import admission
from workflows.runtime.kinds import Parked
from workflows.runtime.limits import ToolTimeout, time_limit
from workflows.runtime.offload import run_sync, to_thread

TOOL_RETRY_PAUSE_SECONDS = 0.2  # doubled after each failed try of a tool call


@dataclass(frozen=True)
class Offer:
    """What the model is offered: tool specs, and function name -> handler and schema."""

    specs: list[dict[str, Any]]
    allowed: dict[str, dict[str, Any]]


@dataclass
class Loop:
    """One attempt's loop: where it records, what it says to whom, what it has done."""

    ctx: handlers.NodeContext
    at: agents.Attempt
    endpoint: providers.Endpoint
    opening: list[dict[str, Any]]
    offer: Offer
    steps: list[core.Step]
    seq: int  # the number the next step takes (read once: only this attempt adds steps)
    writer: streams.TextWriter | None = None  # the attempt's text stream (none outside a worker)
    trace: dict[str, str] | None = None  # the W3C trace context its model calls carry

    def take_seq(self) -> int:
        self.seq += 1
        return self.seq - 1

    @property
    def where(self) -> str:
        return f"llm.agent node {self.ctx.node_id!r}"


def run_agent(node: Node, ctx: handlers.NodeContext) -> dict[str, Any]:
    """Run the loop from its last recorded step until the model answers; return the output.

    The model's turns stream into the attempt's text stream (llm/streams.py: each turn
    between two `turn` markers), which ends with the output or the error, as `llm.chat`'s.
    """
    writer = streams.writer_for(ctx)
    return streams.streamed(writer, lambda: run_loop(start_loop(ctx, writer)))


def run_loop(loop: Loop) -> dict[str, Any]:
    """Take the loop's next moves until the model answers or max_steps is reached."""
    while True:
        move = next_move(loop)
        if isinstance(move, core.Finish):
            return output_of(loop, move)
        if isinstance(move, core.OutOfSteps):
            raise handlers.HandlerError(
                f"{loop.where} reached max_steps ({move.turns} model turns) without a final answer; "
                "raise max_steps, or set on_max_steps to finish to keep the last text."
            )
        step = take_turn(loop) if isinstance(move, core.CallModel) else call_tool(loop, move)
        loop.steps.append(step)


def start_loop(ctx: handlers.NodeContext, writer: streams.TextWriter | None = None) -> Loop:
    """Resolve the provider, render the opening, and read what earlier attempts recorded."""
    where = f"llm.agent node {ctx.node_id!r}"
    opening = chat_messages(ctx, where)  # first: a missing input field is the error to report
    endpoint = resolve_for(ctx, where)
    tools = [str(name) for name in ctx.config.get("tools") or ()]
    fingerprint = core.fingerprint(endpoint.provider, endpoint.model, opening, core.offered_names(ctx.config))
    at = agents.Attempt(ctx.node_run_id, ctx.run_id, ctx.node_id, ctx.attempt, fingerprint)
    steps, seq = agents.loop_start(at)
    workflows = [str(slug) for slug in ctx.config.get("workflow_tools") or ()]
    offer = offer_tools(tools, workflows, core.mcp_tools_of(ctx.config))
    return Loop(ctx, at, endpoint, opening, offer, steps, seq, writer, trace_headers(ctx))


def offer_tools(
    names: list[str], workflows: Sequence[str] = (), mcp: Sequence[tuple[str, str]] = ()
) -> Offer:
    """The tools a node may call that are registered as tools now, then the workflows it may
    call that can run now, then the MCP tools usable now (others are refused by the
    definition's validation; one unregistered, paused or deleted since is simply not offered)."""
    registered = handlers.tools()
    specs, allowed = [], {}
    for name in names:
        handler = registered.get(name)
        if handler is None or handler.config_schema is None:
            continue
        specs.append(core.tool_spec(name, handler.doc, handler.config_schema))
        allowed[core.function_name(name)] = {"handler": name, "schema": handler.config_schema}
    for offered in agenttools.offer(list(workflows)) if workflows else ():
        specs.append(offered.spec)
        name = offered.spec["function"]["name"]
        allowed[name] = {"handler": core.WORKFLOW_PREFIX + offered.slug, "schema": offered.schema}
    for tool in mcpcatalog.offered(list(mcp)) if mcp else ():
        specs.append(tool.spec)
        allowed[tool.spec["function"]["name"]] = {
            "handler": core.mcp_name(tool.server, tool.tool),
            "schema": tool.schema,
        }
    return Offer(specs, allowed)


@dataclass(frozen=True)
class Turn:
    """One model turn about to be asked: its step number, key, messages and time budget."""

    seq: int
    key: str
    messages: list[dict[str, Any]]
    request: dict[str, Any]
    started: datetime
    budget: float
    admitted: admission.Admitted = admission.NOTHING  # what the gate reserved for it (budgets)

    @property
    def label(self) -> str:
        """How its LLM call and recorded call name it."""
        return f"turn {self.seq}"

    def call_request(self, loop: Loop) -> dict[str, Any]:
        """What identifies this turn's call (core/callhash.py): provider, model, messages, tools, options."""
        endpoint = loop.endpoint
        options = call_options(loop.ctx.config)
        return callhash.llm_request(
            endpoint.provider, endpoint.model, self.messages, loop.offer.specs, options
        )

    def call_arguments(self, loop: Loop) -> dict[str, Any]:
        """What `client.complete` (or `acomplete`) is given for this turn."""
        return {
            "tools": loop.offer.specs or None,
            "options": self.admitted.options(call_options(loop.ctx.config)),
            "idempotency_key": self.key,
            "timeout_seconds": self.budget,
            "where": loop.where,
            "on_delta": loop.writer.on_delta if loop.writer else None,
            "on_calls": loop.writer.on_calls if loop.writer else None,
            "trace": loop.trace,
        }


def take_turn(loop: Loop) -> core.Step:
    """Ask the model once, streaming its text; record the turn (or its failure) and return it.

    The stream marks the turn `recorded` only after its step is in Postgres: a turn cut
    short (a kill, a malformed answer) is never a step, and the next attempt asks again.
    """
    turn = begin_turn(loop, admit_turn(loop))
    request = turn.call_request(loop)
    try:
        completion = call_recorded(
            loop.ctx,
            loop.endpoint,
            lambda: client.complete(loop.endpoint, turn.messages, **turn.call_arguments(loop)),
            step=turn.label,
            admitted=turn.admitted,
            request=request,
            cached=True,
            record=(live := LiveTurn(loop, turn, request)),
        )
    except agents.Superseded:
        raise  # its step was refused: nothing more to record
    except BaseException as exc:  # recorded, then re-raised: the attempt fails with it
        failed_turn(
            loop,
            turn,
            record_failure(loop, turn.seq, core.TURN, turn.key, turn.started, exc, request=turn.request),
        )
        recheck_turn(loop, turn, exc)
        raise
    if not live.recorded:  # replayed, or answered from the cache: its call's row is written
        record_turn(loop, turn, completion)
    step, calls = turn_step(turn, completion)
    recorded_turn(loop, completion, calls)
    return step


def admit_turn(loop: Loop) -> admission.Admitted:
    """Pass the turn's call through the runtime's gate (spend budgets) before anything of it
    is recorded: a held turn (kinds.Parked) leaves no step and no mark in the stream, and
    the attempt asks it again when it is released."""
    messages = core.conversation(loop.opening, loop.steps)
    return admit_call(
        loop.ctx, loop.endpoint, messages, loop.offer.specs or None, call_options(loop.ctx.config)
    )


def begin_turn(loop: Loop, admitted: admission.Admitted = admission.NOTHING) -> Turn:
    """Take the turn's step number and build its request; mark its start in the stream."""
    seq = loop.take_seq()
    messages = core.conversation(loop.opening, loop.steps)
    request = {"messages": messages[len(messages) - new_messages(loop) :], "message_count": len(messages)}
    request["tools"] = [spec["function"]["name"] for spec in loop.offer.specs]
    budget = time_budget(
        loop.ctx, loop.ctx.config.get("timeout_seconds") or loop.endpoint.timeout_seconds, loop.where
    )
    turn = Turn(
        seq,
        f"{loop.ctx.run_id}:{loop.ctx.node_id}:turn:{seq}",
        messages,
        request,
        timezone.now(),
        budget,
        admitted,
    )
    if loop.writer:
        # The turn's number as the run page counts it (workflows/agents/tree.py): finished turns + 1.
        loop.writer.begin_turn(seq, 1 + sum(1 for s in core.counted(loop.steps) if s.kind == core.TURN))
    return turn


def recheck_turn(loop: Loop, turn: Turn, exc: BaseException) -> None:
    """After a turn's call failed by its provider's fault, as llm.chat's last call: hold the
    attempt (kinds.Parked) rather than spend it when the provider may not be called now (its
    breaker opened, or the failure was stale: providers_health/gate.py). The failed turn
    stays recorded; the released attempt asks its turn again."""
    if isinstance(exc, client.CallFailed) and exc.retryable and exc.fault is not None:
        recheck_call(loop.ctx, loop.endpoint, turn.messages, call_options(loop.ctx.config), [loop.endpoint])


def failed_turn(loop: Loop, turn: Turn, error: str) -> None:
    if loop.writer:
        loop.writer.end_turn(streams.FAILED, error=error)


def recorded_turn(loop: Loop, completion: client.Completion, calls: list[core.Call]) -> None:
    if loop.writer:
        names = [c.name for c in calls]
        loop.writer.end_turn(streams.RECORDED, finish_reason=completion.finish_reason, tool_calls=names)


def record_turn(
    loop: Loop, turn: Turn, completion: client.Completion, request: dict[str, Any] | None = None
) -> None:
    """Record the answered turn as a step (Postgres); with its call's `request` (a live call),
    the call's row and its recorded request in the same statement (agents/steps.py)."""
    calls = [as_call(c) for c in completion.tool_calls]
    response = {
        "content": completion.text,
        "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls],
    }
    recorded, call = None, None
    if request is not None:
        answer = replays.completion_json(completion)
        recorded = agents.Recorded(loop.ctx, request, answer, turn.label)
        call = usage.call_row(loop.ctx.node_run_id, loop.endpoint, completion, step=turn.label)
    agents.record_step(
        loop.at,
        turn.seq,
        core.TURN,
        core.OK,
        turn.key,
        turn.started,
        timezone.now(),
        request=turn.request,
        response=response,
        model=completion.model or loop.endpoint.model,
        finish_reason=completion.finish_reason or "",
        input_tokens=completion.input_tokens,
        output_tokens=completion.output_tokens,
        recorded=recorded,
        call=call,
    )


@dataclass
class LiveTurn:
    """Records a turn answered live with its call (call_recorded's `record`), and says so."""

    loop: Loop
    turn: Turn
    request: dict[str, Any]
    recorded: bool = False

    def __call__(self, completion: client.Completion) -> None:
        record_turn(self.loop, self.turn, completion, self.request)
        self.recorded = True


def turn_step(turn: Turn, completion: client.Completion) -> tuple[core.Step, list[core.Call]]:
    """The answered turn as the core reads it, and its tool calls."""
    calls = [as_call(c) for c in completion.tool_calls]
    return core.Step(
        turn.seq,
        core.TURN,
        content=completion.text or "",
        calls=tuple(calls),
        input_tokens=completion.input_tokens or 0,
        output_tokens=completion.output_tokens or 0,
    ), calls


# --- in a worker's slot (runtime/slots.py) ----------------------------------------------------


async def run_agent_on_loop(node: Node, ctx: handlers.NodeContext) -> dict[str, Any]:
    """`run_agent` in a worker's slot: model turns awaited, steps written on the sync thread,
    tool calls made in a thread of their own (`offload.to_thread`).

    A tool is a plain handler that may block or use the ORM, so it runs off the loop; off
    the main thread SIGALRM cannot cut it, and its limit is its context's deadline, which the
    built-in tools honour (time_budget), and the node's timeout around the whole attempt.
    """
    loop = await run_sync(start_with_writer, ctx)
    writer = loop.writer

    async def produce() -> dict[str, Any]:
        return await run_loop_on_loop(loop)

    return await streams.astreamed(writer, produce)


def start_with_writer(ctx: handlers.NodeContext) -> Loop:
    """`start_loop` with the attempt's stream writer: one hand-over to the sync thread."""
    return start_loop(ctx, streams.writer_for(ctx))


async def run_loop_on_loop(loop: Loop) -> dict[str, Any]:
    """`run_loop`, awaited.

    A tool call's hand-over to its thread also admits the model's turn that follows it
    (`call_tool_then_admit`): one hand-over fewer between a tool's answer and the next turn,
    the gap a loaded worker's agents waited longest in (docs/benchmarks.md).
    """
    admitted: admission.Admitted | None = None  # the next turn's, when a tool call admitted it
    while True:
        move = next_move(loop)
        if isinstance(move, core.Finish):
            return output_of(loop, move)
        if isinstance(move, core.OutOfSteps):
            raise handlers.HandlerError(
                f"{loop.where} reached max_steps ({move.turns} model turns) without a final answer; "
                "raise max_steps, or set on_max_steps to finish to keep the last text."
            )
        if isinstance(move, core.CallModel):
            loop.steps.append(await take_turn_on_loop(loop, admitted))
            admitted = None
        elif is_mcp_call(loop, move):
            loop.steps.append(await call_mcp_on_loop(loop, move))
        else:
            admitted = await to_thread(call_tool_then_admit, loop, move)


def next_move(loop: Loop) -> core.Move:
    """What the loop does next, from its steps and the node's max_steps and on_max_steps."""
    config = loop.ctx.config
    return core.next_move(
        loop.steps, int(config.get("max_steps", 10)), str(config.get("on_max_steps", core.FAIL))
    )


def call_tool_then_admit(loop: Loop, move: core.CallTool) -> admission.Admitted | None:
    """Make the tool call and add its step; when the model's turn comes next, admit it (as
    `admit_turn`, whose hold or refusal this raises after the tool's step is recorded, as
    the turn would have) and return what to settle."""
    loop.steps.append(call_tool(loop, move))
    return admit_turn(loop) if isinstance(next_move(loop), core.CallModel) else None


async def take_turn_on_loop(loop: Loop, admitted: admission.Admitted | None = None) -> core.Step:
    """`take_turn`, awaited: the stream's markers are written from the loop, in order with its
    text. `admitted`: the turn's admission, when the hand-over before it made it."""
    turn = begin_turn(loop, admitted if admitted is not None else await run_sync(admit_turn, loop))
    request = turn.call_request(loop)
    try:
        completion = await acall_recorded(
            loop.ctx,
            loop.endpoint,
            lambda: client.acomplete(loop.endpoint, turn.messages, **turn.call_arguments(loop)),
            step=turn.label,
            admitted=turn.admitted,
            request=request,
            cached=True,
            # In the hand-over that settles the call: one statement for the call and its step.
            record=(live := LiveTurn(loop, turn, request)),
        )
    except agents.Superseded:
        raise  # its step was refused: nothing more to record
    except BaseException as exc:  # recorded, then re-raised: the attempt fails with it
        error = await run_sync(
            record_failure, loop, turn.seq, core.TURN, turn.key, turn.started, exc, request=turn.request
        )
        failed_turn(loop, turn, error)
        await run_sync(recheck_turn, loop, turn, exc)
        raise
    if not live.recorded:  # replayed, or answered from the cache: its call's row is written
        await run_sync(record_turn, loop, turn, completion)
    step, calls = turn_step(turn, completion)
    recorded_turn(loop, completion, calls)
    return step


def new_messages(loop: Loop) -> int:
    """How many messages this turn adds to the previous turn's (the opening for the first)."""
    done = core.counted(loop.steps)
    turns = [s for s in done if s.kind == core.TURN]
    if not turns:
        return len(loop.opening)
    return 1 + sum(1 for s in done if s.seq > turns[-1].seq)  # its answer, then the tools' results


def as_call(raw: dict[str, Any]) -> core.Call:
    arguments = raw.get("arguments")
    text = arguments if isinstance(arguments, str) else json.dumps(arguments if arguments is not None else {})
    return core.Call(str(raw.get("id") or ""), str(raw.get("name") or ""), text)


def call_options(config: dict[str, Any]) -> dict[str, Any]:
    return {key: config[key] for key in ("temperature", "max_tokens") if key in config}


def call_tool(loop: Loop, move: core.CallTool) -> core.Step:
    """Make one tool call the last turn asked for; record it and return it."""
    seq = loop.take_seq()
    key = move.key(loop.ctx.run_id, loop.ctx.node_id)
    call = move.call
    fields: dict[str, Any] = {"turn_seq": move.turn_seq, "call_id": call.id, "tool": call.name}
    started = timezone.now()
    checked = core.check_call(call, loop.offer.allowed)
    if isinstance(checked, str):
        fields["arguments"] = parsed_or_text(call.arguments)
        return told_error(loop, seq, key, started, checked, fields)
    name, arguments = checked
    fields.update(tool=name, arguments=arguments)
    if name.startswith(core.MCP_PREFIX):
        return call_mcp(loop, ToolStep(seq, key, started, name, arguments, fields))
    if name.startswith(core.WORKFLOW_PREFIX):
        return call_workflows(loop, move, workflow_call(loop, move, seq, started, name, arguments))
    handler = handlers.get_handler(name)
    request, label = callhash.tool_request(name, arguments), f"tool {name}"
    try:
        recorded = replays.recorded_answer(loop.ctx, request, label)
        answer: dict[str, Any] = (recorded.response or {}) if recorded is not None else {}
        if "error" in answer:
            return told_error(loop, seq, key, started, str(answer["error"]), fields)
        result = answer.get("result") if recorded is not None else run_tool(loop, handler, arguments, key)
    except replays.ReplayMiss as exc:
        record_failure(loop, seq, core.TOOL, key, started, exc, **fields)
        raise
    except handlers.HandlerError as exc:
        replays.record_live(loop.ctx, request, {"error": str(exc)}, label)
        return told_error(loop, seq, key, started, str(exc), fields)
    except ToolFailed as exc:
        record_failure(loop, seq, core.TOOL, key, started, exc, **fields)
        raise handlers.HandlerError(str(exc)) from None
    except BaseException as exc:  # recorded, then re-raised: the attempt fails with it
        record_failure(loop, seq, core.TOOL, key, started, exc, **fields)
        raise
    live = None if recorded is not None else agents.Recorded(loop.ctx, request, {"result": result}, label)
    agents.record_step(
        loop.at, seq, core.TOOL, core.OK, key, started, timezone.now(), result=result, recorded=live, **fields
    )
    return core.Step(seq, core.TOOL, call_id=call.id, result=result)


@dataclass(frozen=True)
class ToolStep:
    """A checked tool call about to be made: its step number, key, start and what it records."""

    seq: int
    key: str
    started: datetime
    name: str
    arguments: dict[str, Any]
    fields: dict[str, Any]


def is_mcp_call(loop: Loop, move: core.Move) -> bool:
    """Whether the move calls an MCP tool (its arguments checked or not: call_mcp_on_loop says)."""
    offered = loop.offer.allowed.get(move.call.name) if isinstance(move, core.CallTool) else None
    return offered is not None and str(offered["handler"]).startswith(core.MCP_PREFIX)


def call_mcp(loop: Loop, call: ToolStep) -> core.Step:
    """Make an MCP tool call outside a slot (its async part under asyncio.run); record it."""
    prepared = prepare_mcp(loop, call)
    if isinstance(prepared, mcpcalls.Prepared):
        outcome = asyncio.run(mcpcalls.make(loop.ctx, prepared, call.arguments, call.key))
    else:
        outcome = prepared
    return record_mcp(loop, call, outcome)


async def call_mcp_on_loop(loop: Loop, move: core.CallTool) -> core.Step:
    """`call_mcp` in a worker's slot: the call awaited on the loop, the ORM on the sync thread."""
    seq, key, started = loop.take_seq(), move.key(loop.ctx.run_id, loop.ctx.node_id), timezone.now()
    fields: dict[str, Any] = {"turn_seq": move.turn_seq, "call_id": move.call.id, "tool": move.call.name}
    checked = core.check_call(move.call, loop.offer.allowed)
    if isinstance(checked, str):
        fields["arguments"] = parsed_or_text(move.call.arguments)
        return await run_sync(told_error, loop, seq, key, started, checked, fields)
    fields.update(tool=checked[0], arguments=checked[1])
    call = ToolStep(seq, key, started, checked[0], checked[1], fields)
    prepared = await run_sync(prepare_mcp, loop, call)
    if isinstance(prepared, mcpcalls.Prepared):
        outcome = await mcpcalls.make(loop.ctx, prepared, call.arguments, call.key)
    else:
        outcome = prepared
    return await run_sync(record_mcp, loop, call, outcome)


def prepare_mcp(loop: Loop, call: ToolStep) -> mcpcalls.Prepared | mcpcalls.Outcome:
    try:
        return mcpcalls.prepare(loop.ctx, call.name, call.arguments)
    except replays.ReplayMiss as exc:
        record_failure(loop, call.seq, core.TOOL, call.key, call.started, exc, **call.fields)
        raise


def record_mcp(loop: Loop, call: ToolStep, outcome: mcpcalls.Outcome) -> core.Step:
    """Keep the answer for replay, then record the step: ok with the result, or the error told."""
    mcpcalls.keep(loop.ctx, call.name, call.arguments, outcome)
    if outcome.error:
        return told_error(loop, call.seq, call.key, call.started, outcome.error, call.fields)
    agents.record_step(
        loop.at,
        call.seq,
        core.TOOL,
        core.OK,
        call.key,
        call.started,
        timezone.now(),
        result=outcome.result,
        **call.fields,
    )
    return core.Step(call.seq, core.TOOL, call_id=str(call.fields["call_id"]), result=outcome.result)


def call_workflows(loop: Loop, move: core.CallTool, first: agenttools.ToolCall) -> core.Step:
    """Start the workflow's child run, and those of the workflow calls that follow it in the
    turn, and let the attempt wait for them (workflows/agents/tools.py).

    Raise Parked once the calls are recorded; a first call whose child cannot start is told
    to the model instead (a later one ends the batch, and is told when its turn comes)."""
    try:
        batch = [(first, agenttools.target(first))]
    except children.CannotStart as exc:
        return told_error(
            loop, first.seq, first.key, first.started, f"workflow {first.slug!r}: {exc}", first.fields
        )
    for call in following_workflow_calls(loop, move):
        try:
            batch.append((call, agenttools.target(call)))
        except children.CannotStart:
            loop.seq = call.seq  # not taken: this call is made on its own, later
            break
    started = agenttools.start_calls(loop.at, batch)
    named = ", ".join(
        f"{child.pk} of workflow {call.slug!r}" for (call, _), child in zip(batch, started, strict=True)
    )
    raise Parked(f"{loop.where} waits for child run{'s' if len(started) > 1 else ''} {named}.")


def following_workflow_calls(loop: Loop, move: core.CallTool) -> Iterator[agenttools.ToolCall]:
    """The valid workflow calls right after `move` in its turn, each with the next seq."""
    turn = next(s for s in loop.steps if s.seq == move.turn_seq)
    for index in range(move.index + 1, len(turn.calls)):
        later = core.CallTool(turn.calls[index], move.turn_seq, index)
        checked = core.check_call(later.call, loop.offer.allowed)
        if isinstance(checked, str) or not checked[0].startswith(core.WORKFLOW_PREFIX):
            return
        yield workflow_call(loop, later, loop.take_seq(), timezone.now(), *checked)


def workflow_call(
    loop: Loop, move: core.CallTool, seq: int, started: datetime, name: str, arguments: dict[str, Any]
) -> agenttools.ToolCall:
    """A checked call of a workflow tool (`name`: workflow__<slug>), as its step records it."""
    fields = {"turn_seq": move.turn_seq, "call_id": move.call.id, "tool": name, "arguments": arguments}
    key = move.key(loop.ctx.run_id, loop.ctx.node_id)
    return agenttools.ToolCall(seq, key, started, fields, name[len(core.WORKFLOW_PREFIX) :], arguments)


def told_error(
    loop: Loop, seq: int, key: str, started: datetime, message: str, fields: dict[str, Any]
) -> core.Step:
    """Record a tool call whose error goes back to the model as its result."""
    error = core.bounded(message, core.ERROR_CHARS)
    agents.record_step(
        loop.at, seq, core.TOOL, core.ERROR, key, started, timezone.now(), error=error, **fields
    )
    return core.Step(seq, core.TOOL, status=core.ERROR, call_id=str(fields["call_id"]), error=error)


def run_tool(loop: Loop, handler: handlers.Handler, arguments: dict[str, Any], key: str) -> Any:
    """Call a tool's handler, trying again after a timeout or an unexpected error.

    A HandlerError is the tool's answer and is raised at once; after the last try the
    failure is raised as a HandlerError naming the tool.
    """
    policy = handler.tool or handlers.Tool()
    problem = ""
    for attempt in range(1, policy.max_attempts + 1):
        tool_ctx = tool_context(loop.ctx, key, arguments, policy.timeout_seconds)
        try:
            with time_limit(policy.timeout_seconds, ToolTimeout):
                result = handler.func(tool_ctx)
            json.dumps(result)
            return result
        except handlers.HandlerError:
            raise
        except ToolTimeout:
            problem = f"timed out after {policy.timeout_seconds:g} s"
        except Exception as exc:  # the tool's boundary, as execution.execute is the node's
            problem = f"{type(exc).__name__}: {exc}"
        if attempt < policy.max_attempts:
            time.sleep(min(TOOL_RETRY_PAUSE_SECONDS * 2 ** (attempt - 1), loop.ctx.remaining()))
    raise ToolFailed(f"{loop.where}: tool {handler.name} failed {policy.max_attempts} time(s): {problem}")


class ToolFailed(Exception):
    """A tool call failed on every try: the attempt fails (not told to the model)."""

    def __str__(self) -> str:
        return str(self.args[0])


def tool_context(
    ctx: handlers.NodeContext, key: str, arguments: dict[str, Any], seconds: float
) -> handlers.NodeContext:
    return handlers.NodeContext(
        run_id=ctx.run_id,
        node_id=ctx.node_id,
        attempt=ctx.attempt,
        idempotency_key=key,
        input=ctx.input,
        upstream=ctx.upstream,
        config=arguments,
        deadline=min(ctx.deadline, time.monotonic() + seconds),
    )


def record_failure(
    loop: Loop, seq: int, kind: str, key: str, started: datetime, exc: BaseException, **fields: Any
) -> str:
    """Record a step that did not finish, unless the attempt was taken away meanwhile; return
    its error."""
    error = str(exc) or f"{loop.where}: the node's time limit ended this {kind}."
    with contextlib.suppress(agents.Superseded):  # the attempt is gone: nobody's history
        agents.record_step(
            loop.at, seq, kind, core.FAILED, key, started, timezone.now(), error=error, **fields
        )
    return error


def parsed_or_text(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def output_of(loop: Loop, finish: core.Finish) -> dict[str, Any]:
    done = core.counted(loop.steps)
    return {
        "content": finish.content,
        "finish_reason": finish.reason,
        "model": loop.endpoint.model,
        "provider": loop.endpoint.provider,
        "turns": sum(1 for s in done if s.kind == core.TURN),
        "tool_calls": sum(1 for s in done if s.kind == core.TOOL),
        "usage": {
            "input_tokens": sum(s.input_tokens for s in done),
            "output_tokens": sum(s.output_tokens for s in done),
        },
    }
