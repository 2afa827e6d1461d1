"""The `llm.chat` node: one chat call to a named provider, streamed when it streams.

The URL and key come from the provider (server-side), never from the node config, so a
definition cannot send the key elsewhere. Output: the text, finish reason, model and usage.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from workflows.core import callhash
from workflows.handlers import caching, recordings
from workflows.handlers.builtin import render_template, template_sources, time_budget
from workflows.handlers.registry import HandlerError, NodeContext, node, on_loop
from workflows.llm import client, providers, replays, streams, usage
from workflows.runtime import admission
from workflows.runtime.offload import run_sync
from workflows.store import traceids

if TYPE_CHECKING:
    from workflows.store.responsecache import CachedResponse

NAME_FIELD: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 200}
CHAT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "provider": {
            **NAME_FIELD,
            "description": "A provider an admin set up; default: the default provider.",
        },
        "model": {**NAME_FIELD, "description": "One of the provider's models; default: its default model."},
        "system": {"type": "string", "maxLength": 200_000, "description": "System message (a template)."},
        "prompt": {
            "type": "string",
            "minLength": 1,
            "maxLength": 200_000,
            "description": (
                "User message; {input.key} and {upstream.node.key} are filled in, and in a map "
                "node {item}, {item.key} and {index}."
            ),
        },
        "temperature": {"type": "number", "minimum": 0, "maximum": 2},
        "max_tokens": {"type": "integer", "minimum": 1, "maximum": 1_000_000},
        "timeout_seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": 3600},
        "cache": caching.CACHE_SCHEMA,
        "fallbacks": {
            "type": "array",
            "maxItems": 5,
            "description": "Providers/models tried in order when the one before is unavailable "
            "(its breaker open) or fails with a retryable error.",
            "items": {
                "type": "object",
                "properties": {"provider": NAME_FIELD, "model": NAME_FIELD},
                "required": ["provider"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["prompt"],
    "additionalProperties": False,
}
OPTION_KEYS = ("temperature", "max_tokens")
Recorder = Callable[[client.Completion], None]  # writes a live answer's rows (call_recorded's `record`)


@node("llm.chat", config_schema=CHAT_SCHEMA)
def llm_chat(ctx: NodeContext) -> dict[str, Any]:
    """Ask a chat model of a named provider; return its answer, finish reason, provider, model and usage.

    Streams when the provider does: the text grows live on the run page and over the
    attempt's Server-Sent Events. Every call is recorded with its tokens and cost. With
    `fallbacks`, the next provider/model answers when one is unavailable (its breaker open)
    or fails with a retryable error; the output's `provider` and `model` say which answered.
    """
    where = f"llm.chat node {ctx.node_id!r}"
    messages = chat_messages(ctx, "llm.chat")
    route = route_for(ctx, where)
    options = {k: ctx.config[k] for k in OPTION_KEYS if k in ctx.config}
    for endpoint, last in candidates(route):
        # As configured: a budget's max_tokens is no part of it. Built once: the cache, the
        # replay lookup and the record of the call all key on it.
        request = callhash.llm_request(endpoint.provider, endpoint.model, messages, None, options)
        cache = cache_of(ctx, request)
        if cache[0] and (hit := caching.lookup(cache[1], utcnow())) is not None:
            return cached_chat(ctx, endpoint, hit)  # before the gates: an answer kept costs nothing
        try:
            admitted = admit_call(ctx, endpoint, messages, None, options, route, may_skip=not last)
        except admission.Unavailable:
            continue
        try:
            return chat_once(ctx, endpoint, messages, options, admitted, where, request, cache)
        except client.CallFailed as exc:
            if exc.retryable and not last:
                continue  # the next provider/model answers instead
            if exc.retryable and exc.fault is not None:
                recheck_call(ctx, endpoint, messages, options, route)
            raise
    raise AssertionError("the last candidate neither answered nor raised")  # candidates() ends with last=True


def chat_once(
    ctx: NodeContext,
    endpoint: providers.Endpoint,
    messages: list[dict[str, Any]],
    options: dict[str, Any],
    admitted: admission.Admitted,
    where: str,
    request: dict[str, Any],
    cache: tuple[int | None, str],
) -> dict[str, Any]:
    timeout = time_budget(ctx, ctx.config.get("timeout_seconds") or endpoint.timeout_seconds, where)
    ttl, key = cache
    sent = admitted.options(options)
    writer = streams.writer_for(ctx)
    trace = trace_headers(ctx)

    def call() -> client.Completion:
        return client.complete(
            endpoint,
            messages,
            options=sent,
            idempotency_key=ctx.idempotency_key,
            timeout_seconds=timeout,
            where=where,
            on_delta=writer.on_delta if writer else None,
            trace=trace,
        )

    def produce() -> dict[str, Any]:
        completion = call_recorded(ctx, endpoint, call, admitted=admitted, request=request)
        if ttl:
            keep_answer(ctx, key, completion, ttl)
        return chat_output(completion, endpoint)

    return streams.streamed(writer, produce)


@on_loop("llm.chat")
async def llm_chat_on_loop(ctx: NodeContext) -> dict[str, Any]:
    """`llm_chat` in a worker's slot: the call awaited, the ORM and Redis reads on the sync thread."""
    where = f"llm.chat node {ctx.node_id!r}"
    messages = chat_messages(ctx, "llm.chat")
    route = await run_sync(route_for, ctx, where)
    options = {k: ctx.config[k] for k in OPTION_KEYS if k in ctx.config}
    for endpoint, last in candidates(route):
        # As configured: a budget's max_tokens is no part of it. Built once: the cache, the
        # replay lookup and the record of the call all key on it.
        request = callhash.llm_request(endpoint.provider, endpoint.model, messages, None, options)
        cache = cache_of(ctx, request)
        if cache[0] and (hit := await run_sync(caching.lookup, cache[1], utcnow())) is not None:
            return await run_sync(cached_chat, ctx, endpoint, hit)
        try:
            admitted = await run_sync(admit_call, ctx, endpoint, messages, None, options, route, not last)
        except admission.Unavailable:
            continue
        try:
            return await achat_once(ctx, endpoint, messages, options, admitted, where, request, cache)
        except client.CallFailed as exc:
            if exc.retryable and not last:
                continue
            if exc.retryable and exc.fault is not None:
                await run_sync(recheck_call, ctx, endpoint, messages, options, route)
            raise
    raise AssertionError("the last candidate neither answered nor raised")


async def achat_once(
    ctx: NodeContext,
    endpoint: providers.Endpoint,
    messages: list[dict[str, Any]],
    options: dict[str, Any],
    admitted: admission.Admitted,
    where: str,
    request: dict[str, Any],
    cache: tuple[int | None, str],
) -> dict[str, Any]:
    timeout = time_budget(ctx, ctx.config.get("timeout_seconds") or endpoint.timeout_seconds, where)
    ttl, key = cache
    sent = admitted.options(options)
    writer = await run_sync(streams.writer_for, ctx)
    trace = await run_sync(trace_headers, ctx)

    async def call() -> client.Completion:
        return await client.acomplete(
            endpoint,
            messages,
            options=sent,
            idempotency_key=ctx.idempotency_key,
            timeout_seconds=timeout,
            where=where,
            on_delta=writer.on_delta if writer else None,
            trace=trace,
        )

    async def produce() -> dict[str, Any]:
        completion = await acall_recorded(ctx, endpoint, call, admitted=admitted, request=request)
        if ttl:
            await run_sync(keep_answer, ctx, key, completion, ttl)
        return chat_output(completion, endpoint)

    return await streams.astreamed(writer, produce)


def trace_headers(ctx: NodeContext) -> dict[str, str] | None:
    """The W3C trace context the attempt's LLM calls carry (its span as their parent, as
    `http.request`'s); None for a context made outside a worker (no attempt row)."""
    if not ctx.node_run_id:
        return None
    return traceids.trace_headers(ctx.run_id, ctx.node_id, ctx.attempt)


def cached_chat(ctx: NodeContext, endpoint: providers.Endpoint, hit: CachedResponse) -> dict[str, Any]:
    """A cache hit's output (handlers/caching.py), saying which run paid for the answer."""
    return {
        **chat_output(cached_completion(ctx, endpoint, hit, ""), endpoint),
        "cached": caching.provenance(hit),
    }


def cached_completion(
    ctx: NodeContext, endpoint: providers.Endpoint, hit: CachedResponse, step: str
) -> client.Completion:
    """A cached answer as a completion; its LLM call row records the tokens saved at cost 0."""
    r = hit.response
    completion = client.Completion(
        str(r.get("text") or ""),
        list(r.get("tool_calls") or []),
        r.get("finish_reason"),
        str(r.get("model") or endpoint.model),
        r.get("input_tokens"),
        r.get("output_tokens"),
        0.0,
    )
    usage.record_call(
        node_run_id=ctx.node_run_id,
        endpoint=endpoint,
        completion=completion,
        step=f"cached {step}".strip(),
        cost=Decimal(0),
    )
    return completion


def cache_of(ctx: NodeContext, request: dict[str, Any] | None) -> tuple[int | None, str]:
    """(TTL, key) of a call whose node caches; (None, "") otherwise."""
    ttl = caching.ttl_of(ctx) if request is not None else None
    return (ttl, caching.key_of(request)) if ttl and request is not None else (None, "")


def keep_answer(ctx: NodeContext, key: str, completion: client.Completion, ttl: int) -> None:
    """Keep a live answer in the response cache for `ttl` seconds."""
    counts = {"input_tokens": completion.input_tokens, "output_tokens": completion.output_tokens}
    caching.store(ctx, callhash.LLM, key, replays.completion_json(completion), counts, ttl, utcnow())


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def route_for(ctx: NodeContext, where: str) -> list[providers.Endpoint]:
    """The node's provider/model, then its fallbacks in order, resolved."""
    route = [resolve_for(ctx, where)]
    for index, pair in enumerate(ctx.config.get("fallbacks") or []):
        try:
            route.append(providers.resolve(pair.get("provider"), pair.get("model")))
        except HandlerError as exc:
            text = str(exc).replace("config.", f"config.fallbacks[{index}].", 1)
            raise HandlerError(f"{where}: {text}", retryable=exc.retryable) from None
    return route


def candidates(route: list[providers.Endpoint]) -> list[tuple[providers.Endpoint, bool]]:
    """Each endpoint of the route, with whether it is the last (which holds rather than skips)."""
    return [(endpoint, n == len(route) - 1) for n, endpoint in enumerate(route)]


def recheck_call(
    ctx: NodeContext,
    endpoint: providers.Endpoint,
    messages: list[dict[str, Any]],
    options: dict[str, Any],
    route: list[providers.Endpoint],
) -> None:
    """After the route's last call failed by its provider's fault: hold the attempt
    (kinds.Parked) when no provider/model of the route may be called now."""
    call = call_of(ctx, endpoint, messages, None, options, route)
    if call is not None:
        admission.recheck(call)


def resolve_for(ctx: NodeContext, where: str) -> providers.Endpoint:
    """Resolve the node's provider and model; say which node asked when they are unknown."""
    try:
        return providers.resolve(ctx.config.get("provider"), ctx.config.get("model"))
    except HandlerError as exc:
        raise HandlerError(f"{where}: {exc}", retryable=exc.retryable) from None


def admit_call(
    ctx: NodeContext,
    endpoint: providers.Endpoint,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    options: dict[str, Any],
    route: list[providers.Endpoint] | None = None,
    may_skip: bool = False,
) -> admission.Admitted:
    """Pass a call through the runtime's gate (spend budgets, provider health) before it is
    made: it may hold the attempt (kinds.Parked), fail it, or, with `may_skip`, say the
    provider is unavailable (admission.Unavailable); a context without an attempt row passes."""
    call = call_of(ctx, endpoint, messages, tools, options, route, may_skip)
    return admission.NOTHING if call is None else admission.admit(call)


def call_of(
    ctx: NodeContext,
    endpoint: providers.Endpoint,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    options: dict[str, Any],
    route: list[providers.Endpoint] | None = None,
    may_skip: bool = False,
) -> admission.Call | None:
    """The call as the gates see it: under its attempt's row, or a map item's under its map
    node's (never held: admission.Call.may_hold); None for a context without either."""
    if (under := ctx.recorded_as()) is None:
        return None
    row, attempt, _ = under
    return admission.Call(
        row,
        ctx.run_id,
        ctx.node_id,
        attempt,
        endpoint.provider,
        endpoint.model,
        messages,
        tools,
        options.get("max_tokens"),
        tuple((e.provider, e.model) for e in route or ()),
        may_skip,
        may_hold=ctx.node_run_id != 0,
    )


def settle_call(
    admitted: admission.Admitted, completion: client.Completion | None, failure: BaseException | None = None
) -> None:
    """Settle what the gate admitted with the call's usage (None: the call failed, by its
    provider's fault when `failure` says so)."""
    if completion is None:
        fault = failure.fault if isinstance(failure, client.CallFailed) else None
        admission.settle(admitted, None, None, ok=False, fault=fault)
    else:
        admission.settle(admitted, completion.input_tokens, completion.output_tokens, ok=True)


def call_recorded(
    ctx: NodeContext,
    endpoint: providers.Endpoint,
    call: Callable[[], client.Completion],
    step: str = "",
    admitted: admission.Admitted = admission.NOTHING,
    request: dict[str, Any] | None = None,
    cached: bool = False,
    record: Recorder | None = None,
) -> client.Completion:
    """Make a call and record it (a failed one too), settling what the gate admitted; a
    context without an attempt row records nothing.

    With its `request` (callhash.llm_request), a fork that replays its origin's calls may
    answer it from the record instead (llm/replays.py; what the gate reserved is given back:
    a replayed call costs nothing), and a live call is recorded by its hash. With `cached`
    (an agent's turn), a node with `config.cache` answers it from the response cache
    (handlers/caching.py; what the gate reserved is given back) and keeps a live answer.
    With `record`, a live answer's row and request are written by `record(completion)`
    instead, with the caller's own (an agent's turn and its step: one statement).
    """
    if request is not None:
        replayed = replays.replayed_completion(ctx, endpoint, request, step)
        if replayed is not None:
            settle_call(admitted, None)
            return replayed
    ttl, key = cache_of(ctx, request) if cached else (None, "")
    if ttl and (hit := caching.lookup(key, utcnow())) is not None:
        settle_call(admitted, None)  # answered from the cache: nothing is spent
        return cached_completion(ctx, endpoint, hit, step)
    try:
        completion = call()
    except BaseException as exc:
        settle_call(admitted, None, exc)
        record_failure(ctx, endpoint, exc, step)
        raise
    settle_call(admitted, completion)
    record_answer(ctx, endpoint, completion, request, step, record)
    if ttl:
        keep_answer(ctx, key, completion, ttl)
    return completion


def record_failure(ctx: NodeContext, endpoint: providers.Endpoint, exc: BaseException, step: str) -> None:
    """Record a call that failed with a HandlerError (it may have been paid for)."""
    if isinstance(exc, HandlerError) and (under := ctx.recorded_as(step)) is not None:
        usage.record_call(
            node_run_id=under[0], endpoint=endpoint, completion=None, error=str(exc), step=under[2]
        )


def record_answer(
    ctx: NodeContext,
    endpoint: providers.Endpoint,
    completion: client.Completion,
    request: dict[str, Any] | None,
    step: str,
    record: Recorder | None,
) -> None:
    """Record a live answer: its LLM call's row and its request, or what `record` writes."""
    if record is not None:
        record(completion)
        return
    if (under := ctx.recorded_as(step)) is not None:
        usage.record_call(node_run_id=under[0], endpoint=endpoint, completion=completion, step=under[2])
    if request is not None:
        replays.record_live(ctx, request, replays.completion_json(completion), step)


async def acall_recorded(
    ctx: NodeContext,
    endpoint: providers.Endpoint,
    call: Any,
    step: str = "",
    admitted: admission.Admitted = admission.NOTHING,
    request: dict[str, Any] | None = None,
    cached: bool = False,
    record: Recorder | None = None,
) -> client.Completion:
    """`call_recorded` for a coroutine: the call awaited, its rows written on the sync thread."""
    if request is not None and ctx.recorded_as() is not None and not recordings.is_known_live(ctx.run_id):
        replayed = await run_sync(replays.replayed_completion, ctx, endpoint, request, step)
        if replayed is not None:
            if admitted.tickets:
                await run_sync(settle_call, admitted, None)
            return replayed
    ttl, key = cache_of(ctx, request) if cached else (None, "")
    if ttl and (hit := await run_sync(caching.lookup, key, utcnow())) is not None:
        if admitted.tickets:
            await run_sync(settle_call, admitted, None)
        return await run_sync(cached_completion, ctx, endpoint, hit, step)
    try:
        completion: client.Completion = await call()
    except BaseException as exc:
        if admitted.tickets:  # a cancelled task settles too: the sync thread does not need the loop
            await asyncio.shield(run_sync(settle_call, admitted, None, exc))
        if isinstance(exc, HandlerError):
            await run_sync(record_failure, ctx, endpoint, exc, step)
        raise
    return await run_sync(answered, ctx, endpoint, admitted, completion, request, step, (ttl, key), record)


def answered(
    ctx: NodeContext,
    endpoint: providers.Endpoint,
    admitted: admission.Admitted,
    completion: client.Completion,
    request: dict[str, Any] | None,
    step: str,
    cache: tuple[int | None, str],
    record: Recorder | None = None,
) -> client.Completion:
    """After a live call, on the slots' sync thread in one hand-over (each cost the event loop
    and a sync thread a wake-up): settle what the gate admitted, record the call and its
    request (`record_answer`), keep the answer when the node caches."""
    if admitted.tickets:
        settle_call(admitted, completion)
    record_answer(ctx, endpoint, completion, request, step, record)
    ttl, key = cache
    if ttl:
        keep_answer(ctx, key, completion, ttl)
    return completion


def chat_messages(ctx: NodeContext, where: str) -> list[dict[str, Any]]:
    """Build the system and user messages from the node config's templates."""
    sources = template_sources(ctx)
    prompt = ctx.config.get("prompt")
    if not isinstance(prompt, str) or not prompt:
        raise HandlerError(f"{where}: config.prompt is required.", retryable=False)
    messages = []
    if ctx.config.get("system"):
        system = render_template(ctx.config["system"], sources, f"{where} config.system")
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": render_template(prompt, sources, f"{where} config.prompt")})
    return messages


def chat_output(completion: client.Completion, endpoint: providers.Endpoint | None = None) -> dict[str, Any]:
    """The node's output: text, finish reason, the provider and model that answered, and
    usage (token counts when known)."""
    counts = {"input_tokens": completion.input_tokens, "output_tokens": completion.output_tokens}
    known = [n for n in counts.values() if n is not None]
    usage_out = {k: v for k, v in counts.items() if v is not None}
    if len(known) == 2:
        usage_out["total_tokens"] = sum(known)
    return {
        "content": completion.text,
        "finish_reason": completion.finish_reason,
        "model": completion.model,
        **({"provider": endpoint.provider, "requested_model": endpoint.model} if endpoint else {}),
        "usage": usage_out,
    }
