"""One call to an LLM provider, streamed or not: the seam every LLM node calls.

An OpenAI-compatible provider's call is made here (chat completions); a provider of another
kind is handed to the module registered for its kind (`register_kind`: the Anthropic
Messages API, anthropic_messages.py, which reuses this module's call, errors and assembly).

`complete` sends the messages (and tools), and returns a `Completion`: text, tool calls in
OpenAI's shape, finish reason, model, token counts and latency. With `on_delta` it asks for
a stream (`stream: true`) and hands each text delta over as it arrives; a provider that
answers with one JSON body instead is read the same way as a non-streamed call.

`acomplete` is the same call as a coroutine (httpx's AsyncClient), for a worker's slots
(runtime/slots.py): the request, the reading of the answer and the errors are the same.

Every failure is a `HandlerError` that names the provider, the model and `where` (the node),
with the key redacted: a provider may echo the key back in its error body. An answer that
refuses the request itself (400, 401, 403, 404, 422) is not retryable: the node is dead
after that attempt rather than paying for the same refusal again (NOT_RETRYABLE_STATUSES).
A refusal keeps its status and its retry-after and rate-limit headers (`CallFailed`).
"""

from __future__ import annotations

import asyncio
import email.utils
import itertools
import json
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Protocol

import httpx

from workflows.core import toolcalls
from workflows.core.egress import EgressRefused
from workflows.handlers import egress
from workflows.handlers.builtin import USER_AGENT, shown_url, snippet, switchyard_settings
from workflows.handlers.registry import HandlerError
from workflows.llm.providers import Endpoint
from workflows.runtime.admission import Fault

# The payload keys a node's options may not set: the client owns them.
RESERVED_OPTIONS = frozenset({"model", "messages", "tools", "stream", "stream_options"})


@dataclass(frozen=True)
class Completion:
    """The answer to one call. `tool_calls` items: {"id", "name", "arguments"} where
    `arguments` is the parsed JSON, or the raw string when it does not parse."""

    text: str
    tool_calls: list[dict[str, Any]]
    finish_reason: str | None
    model: str
    input_tokens: int | None
    output_tokens: int | None
    latency_ms: float
    # Time to first token: from sending the request to the first piece of the answer (text or
    # tool call) in a stream; None for an answer that came as one body (nothing came first).
    first_token_ms: float | None = None
    # Of input_tokens, those read from / written to the prompt cache, when the provider says.
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None


class CallFailed(HandlerError):
    """A call that failed; the message already names provider, model and node.

    `status` and `headers` are the provider's answer when it refused with a non-2xx status
    (the rate-limit headers and `retry-after`); `fault` is the provider's fault (a timeout, a
    lost connection, 408, 429, 5xx), which its breaker counts (workflows/providers_health);
    None for a refusal of the request itself."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = True,
        status: int | None = None,
        headers: Any = None,
        fault: Fault | None = None,
    ) -> None:
        super().__init__(message, retryable=retryable)
        self.status = status
        self.headers: dict[str, str] = dict(headers or {})
        self.fault = fault


@dataclass
class _Call:
    endpoint: Endpoint
    where: str
    deadline: float
    started: float = 0.0  # time.monotonic() when the request was sent
    first_token_ms: float | None = None  # set by the first piece of a streamed answer
    path: str = "/chat/completions"  # appended to the provider's base_url

    def mark_first_token(self) -> None:
        if self.first_token_ms is None:
            self.first_token_ms = round((time.monotonic() - self.started) * 1000, 3)

    @property
    def url(self) -> str:
        return self.endpoint.base_url.rstrip("/") + self.path

    def fail(
        self,
        detail: str,
        *,
        retryable: bool = True,
        response: httpx.Response | None = None,
        faulty: bool = False,
    ) -> CallFailed:
        """Return the error to raise: named, located and with the key taken out. With the
        provider's non-2xx `response`, its status, headers and fault ride along; `faulty`:
        the provider's fault without a status (a timeout, a lost connection)."""
        e = self.endpoint
        demo = " (demo provider)" if e.demo else ""
        text = redact(f"{self.where}: provider {e.provider!r}{demo}, model {e.model!r}: {detail}", e.api_key)
        if response is not None:
            fault = fault_of(response, text)
            return CallFailed(
                text,
                retryable=retryable,
                status=response.status_code,
                headers=kept_headers(response),
                fault=fault,
            )
        return CallFailed(
            text, retryable=retryable, fault=Fault(None, None, snippet(detail)) if faulty else None
        )

    def refused(self, response: httpx.Response, body: bytes) -> CallFailed:
        """Return the error for a non-2xx answer, with the provider's fault when it is one."""
        return self.fail(
            status_error(response, body), retryable=is_retryable_status(response), response=response
        )

    @contextmanager
    def told_as_failures(self, timeout_seconds: float) -> Iterator[None]:
        """Turn what httpx (and the egress policy) raise into this call's HandlerError."""
        try:
            yield
        except EgressRefused as exc:
            raise self.fail(f"POST {shown_url(self.url)}: {exc}") from None
        except httpx.TimeoutException as exc:
            detail = f"POST {shown_url(self.url)} timed out after {timeout_seconds:.3g} s."
            raise self.fail(detail, faulty=True) from exc
        except httpx.HTTPError as exc:
            detail = f"POST {shown_url(self.url)} failed: {type(exc).__name__}: {exc}"
            raise self.fail(detail, faulty=True) from exc

    def check_time(self) -> None:
        if time.monotonic() > self.deadline:
            raise self.fail("timed out while reading the answer.")


OnDelta = Callable[[str], None]  # a piece of streamed text
OnCalls = Callable[[toolcalls.ToolCalls], None]  # the tool calls so far (read them when needed)


class KindCalls(Protocol):
    """How a provider kind other than OpenAI-compatible makes `complete`'s call (a module)."""

    complete: Callable[..., Completion]
    acomplete: Callable[..., Awaitable[Completion]]


# Provider kind -> the module that calls its API (anthropic_messages.py), registered when
# Django starts (workflows/apps.py): it builds on this module, which so does not import it.
OTHER_KINDS: dict[str, KindCalls] = {}
OPENAI_KIND = "openai"


def register_kind(kind: str, calls: KindCalls) -> None:
    """Make `complete` and `acomplete` hand calls to providers of `kind` to `calls`."""
    OTHER_KINDS[kind] = calls


def kind_calls(endpoint: Endpoint, where: str) -> KindCalls | None:
    """The module for the endpoint's kind; None for OpenAI-compatible; an error for a kind
    this process has no module for (never a silent call in the wrong API's shape)."""
    if endpoint.kind == OPENAI_KIND:
        return None
    if endpoint.kind not in OTHER_KINDS:
        raise _Call(endpoint, where, 0.0).fail(
            f"provider kind {endpoint.kind!r} is not available in this process.", retryable=False
        )
    return OTHER_KINDS[endpoint.kind]


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
    """Make one chat completion call; raise HandlerError naming provider, model and `where`.

    Streamed (with `on_delta`): each piece of text goes to `on_delta`, and after each piece
    of a tool call, the calls so far to `on_calls` (assembled, not copied: joining their
    arguments on every piece would cost the square of their length). `trace`: the W3C
    `traceparent`/`tracestate` headers to send (traceids.trace_headers).

    A provider of the Anthropic kind is called through its Messages API instead
    (anthropic_messages.py): the same arguments, messages and tools in OpenAI's shape, the
    same Completion and errors."""
    other = kind_calls(endpoint, where)
    if other is not None:
        return other.complete(
            endpoint, messages, tools=tools, options=options, idempotency_key=idempotency_key,
            timeout_seconds=timeout_seconds, where=where, on_delta=on_delta, on_calls=on_calls, trace=trace,
        )  # fmt: skip
    started = time.monotonic()
    call = _Call(endpoint, where, started + timeout_seconds, started)
    payload = request_payload(endpoint, messages, tools, options, stream=on_delta is not None)
    headers = request_headers(endpoint, idempotency_key, trace)
    with (
        call.told_as_failures(timeout_seconds),
        http_client().stream(
            "POST", call.url, headers=headers, json=payload, timeout=timeout_seconds
        ) as response,
    ):
        if not 200 <= response.status_code < 300:
            raise call.refused(response, read_body(response, call))
        if is_event_stream(response):
            parts = read_stream(response, call, on_delta, on_calls)
        else:
            parts = parse_body(read_body(response, call), call)
    return parts.completion(call, (time.monotonic() - started) * 1000)


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
    """`complete` as a coroutine: the same request, answer and errors, awaited on httpx's AsyncClient."""
    other = kind_calls(endpoint, where)
    if other is not None:
        return await other.acomplete(
            endpoint, messages, tools=tools, options=options, idempotency_key=idempotency_key,
            timeout_seconds=timeout_seconds, where=where, on_delta=on_delta, on_calls=on_calls, trace=trace,
        )  # fmt: skip
    started = time.monotonic()
    call = _Call(endpoint, where, started + timeout_seconds, started)
    payload = request_payload(endpoint, messages, tools, options, stream=on_delta is not None)
    headers = request_headers(endpoint, idempotency_key, trace)
    with call.told_as_failures(timeout_seconds):
        async with async_http_client().stream(
            "POST", call.url, headers=headers, json=payload, timeout=timeout_seconds
        ) as response:
            if not 200 <= response.status_code < 300:
                raise call.refused(response, await aread_body(response, call))
            if is_event_stream(response):
                parts = await aread_stream(response, call, on_delta, on_calls)
            else:
                parts = parse_body(await aread_body(response, call), call)
    return parts.completion(call, (time.monotonic() - started) * 1000)


POOLS = 64  # clients per event loop, taken in turn (see async_http_client)
KEEPALIVE_SECONDS = 30.0  # how long an idle connection is kept (httpx: 5)
_async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[httpx.AsyncClient]] = (
    weakref.WeakKeyDictionary()
)
_turns = itertools.count()


def async_http_client() -> httpx.AsyncClient:
    """One of POOLS AsyncClients of the running event loop (a client's pool belongs to the
    loop it runs on), taken in turn.

    No cap on connections: httpx's default of 100 would queue the 101st of a worker's
    hundreds of slots behind the others' streams, which last for tens of seconds. Nor on the
    connections kept alive between calls (each slot holds at most one): with 100 kept, 500
    slots whose turns end together closed 400 connections and opened them again for their
    next turns, a TCP connect a call that took a sixth of a worker's CPU in
    bench/agent_fleet_bench.py (2026-11-27). Idle ones are kept KEEPALIVE_SECONDS: after
    httpx's 5 s, the connections a wave of turns left idle were gone when the next wave came
    (1,579 connections for 6,000 calls of 2,000 agents on 1,000 slots; 724 at 30 s). A
    server that closes an idle connection sooner is seen by httpcore before the connection
    is used again. Several clients because httpcore's pool scans all its connections for
    every request it places and every response it closes (and asks the socket of each idle
    one whether the server closed it): with 500 in one pool that scan was a tenth of a
    worker's CPU in the same bench, with 16 pools still a twentieth; in 64 each holds about 10.
    """
    loop = asyncio.get_running_loop()
    clients = _async_clients.get(loop)
    if clients is None:
        limits = httpx.Limits(
            max_connections=None, max_keepalive_connections=None, keepalive_expiry=KEEPALIVE_SECONDS
        )
        clients = [egress.async_client(follow_redirects=False, limits=limits) for _ in range(POOLS)]
        _async_clients[loop] = clients
    return clients[next(_turns) % POOLS]


@cache
def http_client() -> httpx.Client:
    """One client per process: making one costs 0.4-0.7 s here (its TLS context), and it pools
    connections. Thread-safe; each call passes its own timeout. Its connections are held to
    the egress policy in settings, read when each one opens."""
    return egress.client(follow_redirects=False)


def request_payload(
    endpoint: Endpoint,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    options: dict[str, Any] | None,
    *,
    stream: bool,
) -> dict[str, Any]:
    """Build the request body: the model, the messages, then tools and options."""
    payload: dict[str, Any] = {"model": endpoint.model, "messages": messages}
    if tools:
        payload["tools"] = tools
    payload.update({k: v for k, v in (options or {}).items() if k not in RESERVED_OPTIONS})
    if stream:
        payload["stream"] = True
        payload["stream_options"] = {"include_usage": True}
    return payload


def request_headers(
    endpoint: Endpoint, idempotency_key: str, trace: dict[str, str] | None = None
) -> httpx.Headers:
    """The headers: the trace context when given; Authorization only when the provider has a key."""
    headers = httpx.Headers({"User-Agent": USER_AGENT, "Idempotency-Key": idempotency_key, **(trace or {})})
    if endpoint.api_key:
        headers["Authorization"] = f"Bearer {endpoint.api_key}"
    return headers


def is_event_stream(response: httpx.Response) -> bool:
    media: str = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return media == "text/event-stream"


def read_body(response: httpx.Response, call: _Call) -> bytes:
    """Read a whole body, within the size limit and the deadline."""
    limit = int(switchyard_settings()["HTTP_MAX_RESPONSE_BYTES"])
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > limit:
            raise call.fail(f"the answer is larger than {limit} bytes.")
        call.check_time()
        chunks.append(chunk)
    return b"".join(chunks)


async def aread_body(response: httpx.Response, call: _Call) -> bytes:
    """`read_body`, awaited."""
    limit = int(switchyard_settings()["HTTP_MAX_RESPONSE_BYTES"])
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise call.fail(f"the answer is larger than {limit} bytes.")
        call.check_time()
        chunks.append(chunk)
    return b"".join(chunks)


# Answers that say the request itself is wrong (malformed, unauthorised, forbidden, no such
# model, unprocessable): the same request sent again gets the same answer, so the attempt
# fails for good. 408, 409, 429 and 5xx are the provider's moment and are retried.
NOT_RETRYABLE_STATUSES = frozenset({400, 401, 403, 404, 422})


def is_retryable_status(response: httpx.Response) -> bool:
    """Whether a retry of the call that got this answer could succeed."""
    return response.status_code not in NOT_RETRYABLE_STATUSES


# Answers that are the provider's fault, counted by its breaker: it timed out, is limiting
# the rate, or failed. Every other 4xx is the request's own (workflows/providers_health).
FAULT_STATUSES = frozenset({408, 429})


def fault_of(response: httpx.Response, detail: str) -> Fault | None:
    """The provider's fault in a non-2xx answer, with its Retry-After; None for a refusal."""
    code = response.status_code
    if code not in FAULT_STATUSES and code < 500:
        return None
    return Fault(code, retry_after_seconds(response.headers.get("retry-after")), snippet(detail))


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Parse Retry-After: seconds, or an HTTP date (RFC 9110); None when absent or unreadable."""
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def status_error(response: httpx.Response, body: bytes) -> str:
    """Explain a non-2xx answer, with the provider's own error message when it gives one."""
    text = body.decode("utf-8", errors="replace")
    detail = snippet(text)
    try:
        message = json.loads(body)["error"]["message"]
        if isinstance(message, str) and message:
            detail = snippet(message)
    except (ValueError, KeyError, TypeError):
        pass  # not the OpenAI error shape: the body's start will do
    hint = " Check the provider's API key." if response.status_code in (401, 403) else ""
    return (
        f"POST {shown_url(str(response.request.url))} answered {response.status_code} "
        f"{response.reason_phrase}: {detail}.{hint}"
    )


# The answer's headers a failed call keeps (CallFailed.headers), for whoever decides when to
# try the provider again: how long to wait, and what the provider says is left of its limits.
KEPT_HEADERS = ("retry-after", "retry-after-ms", "request-id", "x-request-id")
KEPT_PREFIXES = ("anthropic-ratelimit-", "x-ratelimit-")


def kept_headers(response: httpx.Response) -> dict[str, str]:
    return {
        name.lower(): value
        for name, value in response.headers.items()
        if name.lower() in KEPT_HEADERS or name.lower().startswith(KEPT_PREFIXES)
    }


# --- assembling an answer -------------------------------------------------------------------


@dataclass
class Parts:
    """An answer being assembled, from one body or from stream chunks."""

    text: list[str] = field(default_factory=list)
    calls: toolcalls.ToolCalls = field(default_factory=toolcalls.ToolCalls)
    finish_reason: str | None = None
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None

    def add_usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            self.input_tokens = as_count(usage.get("prompt_tokens"), self.input_tokens)
            self.output_tokens = as_count(usage.get("completion_tokens"), self.output_tokens)

    def add_tool_calls(self, pieces: Any, call: _Call) -> None:
        """Merge a message's or a delta's `tool_calls`: whole calls, or streamed pieces of them."""
        if pieces is None:
            return
        with malformed_fails(call):
            if not isinstance(pieces, list):
                raise toolcalls.MalformedToolCall(f"tool_calls is not a list: {toolcalls.shown(pieces)}")
            for piece in pieces:
                self.calls.add(piece)

    def tool_calls(self, call: _Call) -> list[dict[str, Any]]:
        with malformed_fails(call):
            return self.calls.calls()

    def completion(self, call: _Call, latency_ms: float) -> Completion:
        return Completion(
            text="".join(self.text),
            tool_calls=self.tool_calls(call),
            finish_reason=self.finish_reason,
            model=self.model or call.endpoint.model,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            latency_ms=round(latency_ms, 3),
            first_token_ms=call.first_token_ms,
        )


@contextmanager
def malformed_fails(call: _Call) -> Iterator[None]:
    """Turn a malformed tool call into the call's error (named, located, key redacted)."""
    try:
        yield
    except toolcalls.MalformedToolCall as exc:
        raise call.fail(f"a malformed tool call: {exc}; nothing was kept.") from None


def as_count(value: Any, fallback: int | None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else fallback


def parse_body(body: bytes, call: _Call) -> Parts:
    """Read a non-streamed chat completion."""
    try:
        data = json.loads(body)
    except ValueError:
        raise call.fail(f"the answer is not JSON: {snippet(body.decode('utf-8', 'replace'))!r}") from None
    try:
        choice = data["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError):
        raise call.fail(f"the answer has no choices[0].message: {snippet(json.dumps(data))!r}") from None
    content = message.get("content") if isinstance(message, dict) else None
    raw_calls = message.get("tool_calls") if isinstance(message, dict) else None
    if not isinstance(content, str) and not raw_calls:
        raise call.fail(f"the answer has no text and no tool calls: {snippet(json.dumps(data))!r}")
    parts = Parts(
        text=[content] if isinstance(content, str) else [], model=str(data.get("model") or "") or None
    )
    parts.add_tool_calls(raw_calls, call)
    parts.finish_reason = choice.get("finish_reason") if isinstance(choice, dict) else None
    parts.add_usage(data.get("usage"))
    return parts


def read_stream(
    response: httpx.Response, call: _Call, on_delta: OnDelta | None, on_calls: OnCalls | None = None
) -> Parts:
    """Read server-sent chunks up to `data: [DONE]`; a stream that stops short is an error."""
    parts = Parts()
    for data in sse_data(response, call):
        if data == "[DONE]":
            return parts
        add_chunk(parts, data, call, on_delta, on_calls)
    raise call.fail("the stream ended before [DONE] (dropped half-way); nothing was kept.")


async def aread_stream(
    response: httpx.Response, call: _Call, on_delta: OnDelta | None, on_calls: OnCalls | None = None
) -> Parts:
    """`read_stream`, awaited; what follows `[DONE]` is read to the answer's end (`drained`)."""
    parts = Parts()
    lines = response.aiter_lines()
    async for line in lines:
        data = sse_line(line, call)
        if data == "[DONE]":
            await drained(lines)
            return parts
        if data is not None:
            add_chunk(parts, data, call, on_delta, on_calls)
    raise call.fail("the stream ended before [DONE] (dropped half-way); nothing was kept.")


# How long a stream's end may take to come after its `[DONE]` (see `drained`).
DRAIN_SECONDS = 1.0


async def drained(lines: AsyncIterator[str]) -> None:
    """Read a streamed answer on to its end (its empty last line, the end of its body).

    httpcore puts a connection back in its pool only once its answer was read to the end,
    and closes it otherwise: stopping at `[DONE]` cost a TCP connect a call, about an eighth
    of a worker's CPU in bench/agent_fleet_bench.py (2026-11-27). A server that keeps the
    stream open after `[DONE]` loses the connection after DRAIN_SECONDS, as it did at once."""
    with suppress(TimeoutError):
        async with asyncio.timeout(DRAIN_SECONDS):
            async for _ in lines:
                pass


def sse_line(line: str, call: _Call) -> str | None:
    """The `data:` payload of a server-sent event's line; None for its other lines."""
    call.check_time()
    if line.startswith("data:"):
        return line[5:].strip()
    if line.startswith("{"):
        raise call.fail(f"a stream line is not a server-sent event: {snippet(line)!r}")
    return None


def sse_data(response: httpx.Response, call: _Call) -> Iterator[str]:
    """Yield the `data:` payload of each server-sent event."""
    for line in response.iter_lines():
        data = sse_line(line, call)
        if data is not None:
            yield data


def add_chunk(
    parts: Parts, data: str, call: _Call, on_delta: OnDelta | None, on_calls: OnCalls | None = None
) -> None:
    """Merge one `chat.completion.chunk` into the answer."""
    try:
        chunk = json.loads(data)
    except ValueError:
        raise call.fail(f"a stream chunk is not JSON: {snippet(data)!r}") from None
    if not isinstance(chunk, dict):
        raise call.fail(f"a stream chunk is not an object: {snippet(data)!r}")
    if isinstance(chunk.get("error"), dict):
        raise call.fail(f"the stream reported an error: {snippet(str(chunk['error'].get('message')))}")
    parts.model = str(chunk.get("model") or "") or parts.model
    parts.add_usage(chunk.get("usage"))
    choices = chunk.get("choices")
    if not isinstance(choices, list):
        raise call.fail(f"a stream chunk has no choices list: {snippet(data)!r}")
    for choice in choices[:1]:
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if not isinstance(delta, dict):
            raise call.fail(f"a stream chunk has no choices[0].delta: {snippet(data)!r}")
        text = delta.get("content")
        if (isinstance(text, str) and text) or delta.get("tool_calls"):
            call.mark_first_token()
        if isinstance(text, str) and text:
            parts.text.append(text)
            if on_delta is not None:
                on_delta(text)
        parts.add_tool_calls(delta.get("tool_calls"), call)
        if on_calls is not None and delta.get("tool_calls"):
            on_calls(parts.calls)
        parts.finish_reason = choice.get("finish_reason") or parts.finish_reason


def redact(message: str, secret: str) -> str:
    """Remove a secret from a message (an endpoint may echo the key back in its error)."""
    return message.replace(secret, "***") if secret else message
