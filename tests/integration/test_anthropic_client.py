"""The Anthropic provider kind (llm/anthropic_messages.py) against a fake of the Messages API
on a real socket: streamed and whole answers, tool use, usage, stop reasons and errors, all
through `client.complete`/`acomplete`, the seam every LLM node calls."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.anthropic_server import FakeAnthropicServer, message
from workflows.llm.client import CallFailed, Completion, acomplete, complete
from workflows.llm.providers import Endpoint

KEY = "sk-ant-secret-4242"
WEATHER = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
TRACE = {
    "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    "tracestate": "switchyard=r:7",
}


@pytest.fixture
def fake() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer(api_key=KEY) as server:
        yield server


def endpoint(fake: FakeAnthropicServer, key: str = KEY) -> Endpoint:
    return Endpoint("claude", fake.base_url, key, "claude-test-1", 5.0, False, kind="anthropic")


def ask(fake: FakeAnthropicServer, messages: list[dict[str, Any]] | None = None, **kw: Any) -> Completion:
    return complete(
        kw.pop("endpoint", None) or endpoint(fake),
        messages
        or [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "tell me a story"}],
        idempotency_key="1:n:1",
        timeout_seconds=5.0,
        where="llm.chat node 'n'",
        **kw,
    )


def test_a_streamed_chat_arrives_in_pieces_with_usage_stop_reason_and_first_token(
    fake: FakeAnthropicServer,
) -> None:
    fake.reply = message("Once upon a time there was a fox", usage={"input_tokens": 12, "output_tokens": 8})
    deltas: list[str] = []
    done = ask(fake, on_delta=deltas.append, trace=TRACE)
    assert len(deltas) == 8 and "".join(deltas) == done.text == "Once upon a time there was a fox"
    assert (done.finish_reason, done.model) == ("stop", "claude-test-1")
    assert (done.input_tokens, done.output_tokens) == (12, 8)
    assert done.first_token_ms is not None and done.first_token_ms <= done.latency_ms
    sent = fake.requests[0]
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == KEY and sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    assert (
        sent.headers["traceparent"] == TRACE["traceparent"] and sent.headers["tracestate"] == "switchyard=r:7"
    )
    assert sent.json["system"] == "Be brief." and sent.json["stream"] is True
    assert sent.json["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "tell me a story"}]}
    ]
    assert sent.json["max_tokens"] == 4096


def test_a_streamed_tool_use_becomes_the_loops_tool_calls(fake: FakeAnthropicServer) -> None:
    fake.reply = message(
        "Let me look.",
        ("toolu_1", "weather", {"city": "Oslo", "unit": "celsius"}),
        ("toolu_2", "clock", {}),
    )
    seen: list[list[tuple[str, str]]] = []
    done = ask(
        fake, tools=[WEATHER], on_delta=lambda _: None, on_calls=lambda calls: seen.append(calls.progress())
    )
    assert done.finish_reason == "tool_calls" and done.text == "Let me look."
    assert done.tool_calls == [
        {"id": "toolu_1", "name": "weather", "arguments": {"city": "Oslo", "unit": "celsius"}},
        {"id": "toolu_2", "name": "clock", "arguments": {}},
    ]
    assert len(seen) > 3  # the input JSON came in pieces, each shown as it came
    tools = fake.requests[0].json["tools"]
    assert tools == [
        {
            "name": "weather",
            "description": "The weather in a city.",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ]


def test_tool_results_go_back_as_tool_result_blocks_in_one_user_turn(fake: FakeAnthropicServer) -> None:
    conversation = [
        {"role": "user", "content": "weather and time?"},
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {
                    "id": "toolu_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
                },
                {"id": "toolu_2", "type": "function", "function": {"name": "clock", "arguments": ""}},
            ],
        },
        {"role": "tool", "tool_call_id": "toolu_1", "content": '{"temp": 3}'},
        {"role": "tool", "tool_call_id": "toolu_2", "content": "error: no clock"},
    ]
    ask(fake, conversation, tools=[WEATHER])
    assert fake.requests[0].json["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "weather and time?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}},
                {"type": "tool_use", "id": "toolu_2", "name": "clock", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"temp": 3}'},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "error: no clock"},
            ],
        },
    ]
    assert "system" not in fake.requests[0].json


def test_a_whole_answer_counts_cache_tokens_into_input_and_keeps_them_apart(
    fake: FakeAnthropicServer,
) -> None:
    usage = {
        "input_tokens": 5,
        "output_tokens": 4,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 20,
    }
    fake.reply = message("short answer here", usage=usage, stop_reason="max_tokens")
    done = ask(fake, options={"max_tokens": 4, "temperature": 0.2})
    assert (done.text, done.finish_reason, done.first_token_ms) == ("short answer here", "length", None)
    assert (done.input_tokens, done.output_tokens) == (125, 4)
    assert (done.cache_read_tokens, done.cache_write_tokens) == (100, 20)
    assert fake.requests[0].json["max_tokens"] == 4 and fake.requests[0].json["temperature"] == 0.2


def test_a_429_is_retryable_and_keeps_retry_after_and_the_rate_limit_headers(
    fake: FakeAnthropicServer,
) -> None:
    limits = {
        "retry-after": "7",
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": "2026-11-27T10:00:07Z",
    }
    fake.errors = [(429, "rate_limit_error", limits)]
    with pytest.raises(CallFailed) as failed:
        ask(fake)
    error = failed.value
    assert error.retryable and error.status == 429
    assert error.headers["retry-after"] == "7"
    assert error.headers["anthropic-ratelimit-requests-remaining"] == "0"
    assert error.headers["request-id"] == "req_fake"
    assert "429" in str(error) and "rate_limit_error" in str(error) and "retry-after 7 s" in str(error)
    assert "provider 'claude'" in str(error) and "llm.chat node 'n'" in str(error)


def test_a_529_overloaded_is_retryable_and_a_400_is_not(fake: FakeAnthropicServer) -> None:
    fake.errors = [(529, "overloaded_error", {}), (400, "invalid_request_error", {})]
    with pytest.raises(CallFailed) as overloaded:
        ask(fake)
    assert overloaded.value.retryable and "overloaded_error" in str(overloaded.value)
    with pytest.raises(CallFailed) as refused:
        ask(fake)
    assert not refused.value.retryable and refused.value.status == 400
    assert "invalid_request_error" in str(refused.value)


def test_a_wrong_key_is_not_retried_and_never_shown(fake: FakeAnthropicServer) -> None:
    with pytest.raises(CallFailed) as failed:
        ask(fake, endpoint=endpoint(fake, key="sk-ant-wrong-key"))
    assert not failed.value.retryable and "authentication_error" in str(failed.value)
    assert "sk-ant-wrong-key" not in str(failed.value) and "Check the provider's API key" in str(failed.value)


def test_an_error_event_or_a_dropped_stream_fails_the_call(fake: FakeAnthropicServer) -> None:
    fake.stream_error = True
    with pytest.raises(CallFailed) as overloaded:
        ask(fake, on_delta=lambda _: None)
    assert overloaded.value.retryable and "overloaded_error" in str(overloaded.value)
    fake.stream_error, fake.drop_after = False, 4
    with pytest.raises(CallFailed, match="ended before message_stop"):
        ask(fake, on_delta=lambda _: None)


def test_the_coroutine_reads_the_same_stream_the_same_way(fake: FakeAnthropicServer) -> None:
    fake.reply = message("Checking.", ("toolu_9", "weather", {"city": "Bergen"}))
    deltas: list[str] = []

    async def call() -> Completion:
        return await acomplete(
            endpoint(fake),
            [{"role": "user", "content": "weather?"}],
            tools=[WEATHER],
            idempotency_key="1:n:1",
            timeout_seconds=5.0,
            where="llm.agent node 'a'",
            on_delta=deltas.append,
        )

    done = asyncio.run(call())
    assert deltas == ["Checking."] and done.finish_reason == "tool_calls"
    assert done.tool_calls == [{"id": "toolu_9", "name": "weather", "arguments": {"city": "Bergen"}}]
    assert done.first_token_ms is not None


def test_a_kind_without_a_module_is_refused_not_called_in_the_wrong_shape(fake: FakeAnthropicServer) -> None:
    odd = Endpoint("odd", fake.base_url, KEY, "m", 5.0, False, kind="gemini")
    with pytest.raises(CallFailed, match="provider kind 'gemini' is not available") as failed:
        ask(fake, endpoint=odd)
    assert not failed.value.retryable and fake.requests == []
