"""One call to Anthropic's Messages API (`POST {base_url}/v1/messages`), streamed or not.

The provider kind "anthropic" behind the same seam as the OpenAI-compatible kind:
`client.complete` hands a call here when its endpoint is of this kind (workflows/apps.py
registers this module with `client.register_kind` when Django starts). The caller's messages
and tools stay in OpenAI's shape (the agent loop, the recorded steps and replays know no
other); this module translates them on the way out and the answer on the way back:

- system messages -> the top-level `system`; an assistant's `tool_calls` -> `tool_use`
  blocks (input: the parsed arguments); `tool` messages -> `tool_result` blocks, the results
  of one turn together in one user message, as the API requires;
- tools {"type": "function", "function": {name, description, parameters}} -> {name,
  description, input_schema};
- `max_tokens` is required by the API: DEFAULT_MAX_TOKENS when the node sets none;
- the answer's `text` blocks -> text, `tool_use` blocks -> tool calls (streamed as
  `input_json_delta` pieces, assembled by core/toolcalls.py like OpenAI's), `stop_reason` ->
  finish_reason in OpenAI's words (STOP_REASONS) so conditions and pages read one vocabulary,
  usage -> input tokens (uncached + cache writes + cache reads: what the budgets and the cost
  count) and output tokens, the cache counts kept apart as well.

Streaming reads the server-sent events message_start, content_block_start/delta/stop,
message_delta, message_stop, ping and error; a stream that ends before message_stop, or
reports an error event, fails the call. Errors: the API's {"type": "error", "error": {"type",
"message"}} shape names the cause; 400/401/403/404/413/422 are not retried
(invalid_request_error and friends), 429 (rate_limit_error) and 5xx/529 (overloaded_error)
are, and the failure keeps `retry-after` and the `anthropic-ratelimit-*` headers
(CallFailed.headers).

Why not the official SDK (anthropic 2.14): it is built on httpx2, not httpx, and refuses an
httpx client, so its calls would bypass the egress policy's guarded transport
(handlers/egress.py), the worker's shared per-loop pools, and the size and deadline checks
of client.py; and it costs more per token and at import (bench/anthropic_sdk_bench.py,
docs/admins/llm-providers.md "Why hand-written"). The wire format is small and documented.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from workflows.handlers.builtin import USER_AGENT, shown_url, snippet
from workflows.llm.client import (
    RESERVED_OPTIONS,
    Completion,
    OnCalls,
    OnDelta,
    Parts,
    _Call,
    aread_body,
    as_count,
    async_http_client,
    http_client,
    is_event_stream,
    read_body,
)
from workflows.llm.providers import Endpoint

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
# Anthropic's stop reasons in the words OpenAI-compatible providers use; others pass as they are.
STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
# Refusals of the request itself: sent again, they are refused again (as client.py's).
NOT_RETRYABLE_STATUSES = frozenset({400, 401, 403, 404, 413, 422})
# Error events in a stream that a later attempt may not meet.
RETRYABLE_ERROR_TYPES = frozenset({"overloaded_error", "api_error", "rate_limit_error", "timeout_error"})


def messages_path(base_url: str) -> str:
    """What `{base_url}` is followed by: /v1/messages, or /messages when it already ends in /v1."""
    return "/messages" if base_url.rstrip("/").endswith("/v1") else "/v1/messages"


def complete(
    endpoint: Endpoint,
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None = None,
    options: dict[str, Any] | None = None,
    idempotency_key: str,
    timeout_seconds: float,
    where: str,
    on_delta: OnDelta | None = None,
    on_calls: OnCalls | None = None,
    trace: dict[str, str] | None = None,
) -> Completion:
    """client.complete for a provider of the Anthropic kind."""
    call = new_call(endpoint, where, timeout_seconds)
    payload = request_payload(endpoint, messages, tools, options, stream=on_delta is not None)
    headers = request_headers(endpoint, idempotency_key, trace)
    with (
        call.told_as_failures(timeout_seconds),
        http_client().stream(
            "POST", call.url, headers=headers, json=payload, timeout=timeout_seconds
        ) as response,
    ):
        if not 200 <= response.status_code < 300:
            raise refusal(call, response, read_body(response, call))
        if is_event_stream(response):
            parts = read_events(sse_events(response.iter_lines(), call), call, on_delta, on_calls)
        else:
            parts = parse_body(read_body(response, call), call)
    return parts.completion(call)


async def acomplete(
    endpoint: Endpoint,
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None = None,
    options: dict[str, Any] | None = None,
    idempotency_key: str,
    timeout_seconds: float,
    where: str,
    on_delta: OnDelta | None = None,
    on_calls: OnCalls | None = None,
    trace: dict[str, str] | None = None,
) -> Completion:
    """`complete` as a coroutine, on the loop's shared AsyncClient."""
    call = new_call(endpoint, where, timeout_seconds)
    payload = request_payload(endpoint, messages, tools, options, stream=on_delta is not None)
    headers = request_headers(endpoint, idempotency_key, trace)
    with call.told_as_failures(timeout_seconds):
        async with async_http_client().stream(
            "POST", call.url, headers=headers, json=payload, timeout=timeout_seconds
        ) as response:
            if not 200 <= response.status_code < 300:
                raise refusal(call, response, await aread_body(response, call))
            if is_event_stream(response):
                parts = MessageParts()
                async for name, data in asse_events(response.aiter_lines(), call):
                    if add_event(parts, name, data, call, on_delta, on_calls):
                        break
                else:
                    raise stopped_short(call)
            else:
                parts = parse_body(await aread_body(response, call), call)
    return parts.completion(call)


def new_call(endpoint: Endpoint, where: str, timeout_seconds: float) -> _Call:
    started = time.monotonic()
    return _Call(endpoint, where, started + timeout_seconds, started, path=messages_path(endpoint.base_url))


# --- the request ----------------------------------------------------------------------------


def request_headers(endpoint: Endpoint, idempotency_key: str, trace: dict[str, str] | None) -> httpx.Headers:
    """The API's headers (x-api-key, anthropic-version), ours, and the trace context."""
    headers = httpx.Headers(
        {
            "User-Agent": USER_AGENT,
            "Idempotency-Key": idempotency_key,
            "anthropic-version": API_VERSION,
            **(trace or {}),
        }
    )
    if endpoint.api_key:
        headers["x-api-key"] = endpoint.api_key
    return headers


def request_payload(
    endpoint: Endpoint,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    options: dict[str, Any] | None,
    *,
    stream: bool,
) -> dict[str, Any]:
    """Build the Messages API body from OpenAI-shaped messages, tools and options."""
    system = "\n\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
    payload: dict[str, Any] = {
        "model": endpoint.model,
        "max_tokens": DEFAULT_MAX_TOKENS,
        "messages": anthropic_messages(messages),
    }
    if system:
        payload["system"] = system
    if tools:
        payload["tools"] = [anthropic_tool(t) for t in tools]
    payload.update({k: v for k, v in (options or {}).items() if k not in RESERVED_OPTIONS})
    if stream:
        payload["stream"] = True
    return payload


def anthropic_tool(spec: dict[str, Any]) -> dict[str, Any]:
    function = spec.get("function") or spec
    tool = {"name": function["name"], "input_schema": function.get("parameters") or {"type": "object"}}
    if function.get("description"):
        tool["description"] = function["description"]
    return tool


def anthropic_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation without system messages, as user and assistant turns of content blocks;
    consecutive messages of one role are one turn (a turn's tool results go together)."""
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "system":
            continue
        blocks = content_blocks(message)
        speaker = "assistant" if role == "assistant" else "user"
        if turns and turns[-1]["role"] == speaker:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": speaker, "content": blocks})
    return turns


def content_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    """One OpenAI-shaped message as Anthropic content blocks."""
    content = message.get("content")
    if message.get("role") == "tool":
        return [
            {
                "type": "tool_result",
                "tool_use_id": str(message.get("tool_call_id") or ""),
                "content": str(content or ""),
            }
        ]
    blocks: list[dict[str, Any]] = []
    if isinstance(content, str) and content:
        blocks.append({"type": "text", "text": content})
    elif isinstance(content, list):
        blocks.extend(content)  # already blocks
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        blocks.append(
            {
                "type": "tool_use",
                "id": call.get("id"),
                "name": function.get("name"),
                "input": tool_input(function.get("arguments")),
            }
        )
    return blocks


def tool_input(arguments: Any) -> dict[str, Any]:
    """A tool call's arguments as the object `tool_use.input` must be; text that is not a JSON
    object (the model's own mistake, told back to it as an error) is kept under "arguments"."""
    if isinstance(arguments, dict):
        return arguments
    if not isinstance(arguments, str) or not arguments.strip():
        return {}
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return {"arguments": arguments}
    return parsed if isinstance(parsed, dict) else {"arguments": parsed}


# --- refusals -------------------------------------------------------------------------------


def refusal(call: _Call, response: httpx.Response, body: bytes) -> Exception:
    """The error for a non-2xx answer: status, the API's error type and message, headers kept."""
    kind, message = error_of(body)
    detail = snippet(message) if message else snippet(body.decode("utf-8", errors="replace"))
    hint = " Check the provider's API key." if response.status_code in (401, 403) else ""
    wait = response.headers.get("retry-after")
    after = f" (retry-after {wait} s)" if wait else ""
    text = (
        f"POST {shown_url(str(response.request.url))} answered {response.status_code} "
        f"{kind or response.reason_phrase}{after}: {detail}.{hint}"
    )
    retryable = response.status_code not in NOT_RETRYABLE_STATUSES
    return call.fail(text, retryable=retryable, response=response)


def error_of(body: bytes | dict[str, Any]) -> tuple[str, str]:
    """The (type, message) of the API's error shape; empty strings when it is not that shape."""
    try:
        data = json.loads(body) if isinstance(body, bytes) else body
        error = data["error"]
        return str(error.get("type") or ""), str(error.get("message") or "")
    except (ValueError, KeyError, TypeError, AttributeError):
        return "", ""


def stopped_short(call: _Call) -> Exception:
    return call.fail("the stream ended before message_stop (dropped half-way); nothing was kept.")


# --- the answer -----------------------------------------------------------------------------


@dataclass
class MessageParts(Parts):
    """An answer being assembled, with Anthropic's usage and blocks."""

    uncached_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    tool_of_block: dict[int, int] = field(default_factory=dict)  # content block index -> call index
    has_arguments: set[int] = field(default_factory=set)  # calls that got some input JSON

    def add_usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        self.uncached_tokens = as_count(usage.get("input_tokens"), self.uncached_tokens)
        self.cache_read_tokens = as_count(usage.get("cache_read_input_tokens"), self.cache_read_tokens)
        self.cache_write_tokens = as_count(usage.get("cache_creation_input_tokens"), self.cache_write_tokens)
        self.output_tokens = as_count(usage.get("output_tokens"), self.output_tokens)
        known = [
            n
            for n in (self.uncached_tokens, self.cache_read_tokens, self.cache_write_tokens)
            if n is not None
        ]
        self.input_tokens = sum(known) if known else None

    def add_stop_reason(self, reason: Any) -> None:
        if isinstance(reason, str) and reason:
            self.finish_reason = STOP_REASONS.get(reason, reason)

    def completion(self, call: _Call, latency_ms: float | None = None) -> Completion:
        took = (time.monotonic() - call.started) * 1000 if latency_ms is None else latency_ms
        return replace(
            super().completion(call, took),
            cache_read_tokens=self.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens,
        )


def parse_body(body: bytes, call: _Call) -> MessageParts:
    """Read a whole (non-streamed) message."""
    try:
        data = json.loads(body)
    except ValueError:
        raise call.fail(f"the answer is not JSON: {snippet(body.decode('utf-8', 'replace'))!r}") from None
    content = data.get("content") if isinstance(data, dict) else None
    if not isinstance(content, list):
        raise call.fail(f"the answer has no content list: {snippet(json.dumps(data))!r}")
    parts = MessageParts(model=str(data.get("model") or "") or None)
    for block in content:
        if not isinstance(block, dict):
            raise call.fail(f"a content block is not an object: {snippet(json.dumps(block))!r}")
        if block.get("type") == "text":
            parts.text.append(str(block.get("text") or ""))
        elif block.get("type") == "tool_use":
            piece = {
                "id": block.get("id"),
                "function": {"name": block.get("name"), "arguments": block.get("input")},
            }
            parts.add_tool_calls([piece], call)
    parts.add_stop_reason(data.get("stop_reason"))
    parts.add_usage(data.get("usage"))
    return parts


def read_events(
    events: Iterator[tuple[str, str]], call: _Call, on_delta: OnDelta | None, on_calls: OnCalls | None
) -> MessageParts:
    """Fold a stream's events up to message_stop; a stream that stops short is an error."""
    parts = MessageParts()
    for name, data in events:
        if add_event(parts, name, data, call, on_delta, on_calls):
            return parts
    raise stopped_short(call)


def add_event(
    parts: MessageParts, name: str, data: str, call: _Call, on_delta: OnDelta | None, on_calls: OnCalls | None
) -> bool:
    """Merge one server-sent event into the answer; return True at message_stop."""
    try:
        event = json.loads(data)
    except ValueError:
        raise call.fail(f"a stream event is not JSON: {snippet(data)!r}") from None
    if not isinstance(event, dict):
        raise call.fail(f"a stream event is not an object: {snippet(data)!r}")
    kind = str(event.get("type") or name)
    if kind == "message_stop":
        return True
    if kind == "error":
        error_type, told = error_of(event)
        retryable = error_type in RETRYABLE_ERROR_TYPES
        raise call.fail(
            f"the stream reported {error_type or 'an error'}: {snippet(told)}", retryable=retryable
        )
    if kind == "message_start":
        message = object_in(event, "message")
        parts.model = str(message.get("model") or "") or parts.model
        parts.add_usage(message.get("usage"))
    elif kind == "message_delta":
        parts.add_stop_reason(object_in(event, "delta").get("stop_reason"))
        parts.add_usage(event.get("usage"))
    elif kind == "content_block_start":
        start_block(parts, event, call, on_calls)
    elif kind == "content_block_delta":
        add_delta(parts, event, call, on_delta, on_calls)
    elif kind == "content_block_stop":
        stop_block(parts, event, call)
    return False  # ping, and event types added after this was written, are skipped


def object_in(event: dict[str, Any], key: str) -> dict[str, Any]:
    value = event.get(key)
    return value if isinstance(value, dict) else {}


def block_index(event: dict[str, Any], call: _Call) -> int:
    index = event.get("index")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise call.fail(f"a {event.get('type')} event has no block index: {snippet(json.dumps(event))!r}")
    return index


def start_block(parts: MessageParts, event: dict[str, Any], call: _Call, on_calls: OnCalls | None) -> None:
    block = event.get("content_block")
    if not isinstance(block, dict):
        raise call.fail(f"a content_block_start has no content_block: {snippet(json.dumps(event))!r}")
    index = block_index(event, call)
    if block.get("type") == "text" and block.get("text"):
        parts.text.append(str(block["text"]))
    if block.get("type") != "tool_use":
        return
    call.mark_first_token()
    number = parts.tool_of_block.setdefault(index, len(parts.tool_of_block))
    start_input = block.get("input")
    arguments = json.dumps(start_input) if isinstance(start_input, dict) and start_input else ""
    if arguments:
        parts.has_arguments.add(number)
    piece = {
        "index": number,
        "id": block.get("id"),
        "function": {"name": block.get("name"), "arguments": arguments},
    }
    parts.add_tool_calls([piece], call)
    if on_calls is not None:
        on_calls(parts.calls)


def add_delta(
    parts: MessageParts,
    event: dict[str, Any],
    call: _Call,
    on_delta: OnDelta | None,
    on_calls: OnCalls | None,
) -> None:
    delta = event.get("delta")
    if not isinstance(delta, dict):
        raise call.fail(f"a content_block_delta has no delta: {snippet(json.dumps(event))!r}")
    if delta.get("type") == "text_delta":
        text = delta.get("text")
        if isinstance(text, str) and text:
            call.mark_first_token()
            parts.text.append(text)
            if on_delta is not None:
                on_delta(text)
    elif delta.get("type") == "input_json_delta":
        number = parts.tool_of_block.get(block_index(event, call))
        if number is None:
            raise call.fail(f"input_json_delta for block {event.get('index')}, which is no tool_use block.")
        fragment = delta.get("partial_json")
        if isinstance(fragment, str) and fragment:
            parts.has_arguments.add(number)
            parts.add_tool_calls([{"index": number, "function": {"arguments": fragment}}], call)
            if on_calls is not None:
                on_calls(parts.calls)
    # thinking_delta, signature_delta, citations_delta: not part of the answer's text


def stop_block(parts: MessageParts, event: dict[str, Any], call: _Call) -> None:
    """A tool_use block that got no input JSON at all takes {} (a tool without parameters)."""
    number = parts.tool_of_block.get(block_index(event, call))
    if number is not None and number not in parts.has_arguments:
        parts.has_arguments.add(number)
        parts.add_tool_calls([{"index": number, "function": {"arguments": "{}"}}], call)


# --- server-sent events ---------------------------------------------------------------------


@dataclass
class EventReader:
    """Split SSE lines into (event name, data) pairs: a blank line ends an event."""

    call: _Call
    name: str = ""
    data: list[str] = field(default_factory=list)

    def feed(self, line: str) -> tuple[str, str] | None:
        self.call.check_time()
        if line == "":
            if not self.data:
                self.name = ""
                return None
            done = (self.name, "\n".join(self.data))
            self.name, self.data = "", []
            return done
        field_name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field_name == "event":
            self.name = value
        elif field_name == "data":
            self.data.append(value)
        elif line.startswith("{"):
            raise self.call.fail(f"a stream line is not a server-sent event: {snippet(line)!r}")
        return None

    def last(self) -> tuple[str, str] | None:
        """An event the stream did not end with a blank line."""
        return (self.name, "\n".join(self.data)) if self.data else None


def sse_events(lines: Iterator[str], call: _Call) -> Iterator[tuple[str, str]]:
    reader = EventReader(call)
    for line in lines:
        event = reader.feed(line)
        if event is not None:
            yield event
    last = reader.last()
    if last is not None:
        yield last


async def asse_events(lines: AsyncIterator[str], call: _Call) -> AsyncIterator[tuple[str, str]]:
    reader = EventReader(call)
    async for line in lines:
        event = reader.feed(line)
        if event is not None:
            yield event
    last = reader.last()
    if last is not None:
        yield last
