"""workflows.llm.client against the fake provider on a real socket: streamed and whole answers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest

from tests.fakes.llm_server import FakeLLMServer
from workflows.handlers.registry import HandlerError
from workflows.llm.client import CallFailed, complete
from workflows.llm.providers import Endpoint

KEY = "sk-secret-4242"
WEATHER = {"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}


@pytest.fixture
def fake() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(api_key=KEY) as server:
        yield server


def endpoint(fake: FakeLLMServer, key: str = KEY) -> Endpoint:
    return Endpoint("acme", fake.base_url, key, "tiny-1", 5.0, False)


def ask(fake: FakeLLMServer, deltas: list[str] | None = None, **kw: Any) -> Any:
    on_delta = deltas.append if deltas is not None else None
    return complete(
        kw.pop("endpoint", None) or endpoint(fake),
        [{"role": "user", "content": "tell me a short story"}],
        idempotency_key="1:n:1",
        timeout_seconds=kw.pop("timeout_seconds", 5.0),
        where="llm.chat node 'n'",
        on_delta=on_delta,
        **kw,
    )


def tool_reply(request: Any) -> dict[str, Any]:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
    }
    return {
        "model": "tiny-1-2026",
        "choices": [
            {
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7},
    }


def test_a_streamed_answer_hands_each_delta_over_and_adds_up_to_the_text(fake: FakeLLMServer) -> None:
    deltas: list[str] = []
    done = ask(fake, deltas)
    assert fake.requests[0].json["stream"] is True
    assert len(deltas) == 6 and "".join(deltas) == done.text == "echo: tell me a short story"
    assert done.finish_reason == "stop" and done.model == "tiny-1"
    assert done.input_tokens == 5 and done.output_tokens == 6
    assert done.latency_ms > 0


def test_without_on_delta_the_call_is_not_streamed(fake: FakeLLMServer) -> None:
    done = ask(fake)
    assert "stream" not in fake.requests[0].json
    assert done.text == "echo: tell me a short story"


def test_a_provider_that_cannot_stream_still_answers_a_streamed_call(fake: FakeLLMServer) -> None:
    fake.streaming = False
    deltas: list[str] = []
    assert ask(fake, deltas).text == "echo: tell me a short story"
    assert deltas == []


@pytest.mark.parametrize("streamed", [True, False])
def test_tool_calls_come_back_with_parsed_arguments(fake: FakeLLMServer, streamed: bool) -> None:
    fake.reply = tool_reply
    done = ask(fake, [] if streamed else None, tools=[WEATHER])
    assert fake.requests[0].json["tools"] == [WEATHER]
    assert done.tool_calls == [{"id": "call_1", "name": "weather", "arguments": {"city": "Oslo"}}]
    assert done.finish_reason == "tool_calls" and done.model == "tiny-1-2026"
    assert (done.input_tokens, done.output_tokens) == (11, 7)


def two_calls_reply(request: Any) -> dict[str, Any]:
    answer = tool_reply(request)
    message = answer["choices"][0]["message"]
    message["content"] = "Checking both."
    message["tool_calls"].append(
        {
            "id": "call_2",
            "type": "function",
            "function": {"name": "lookup_order", "arguments": '{"order_id": "A-1001", "lines": [1, 2]}'},
        }
    )
    return answer


def test_several_streamed_tool_calls_assemble_into_the_calls_of_the_whole_answer(fake: FakeLLMServer) -> None:
    fake.reply = two_calls_reply
    deltas: list[str] = []
    streamed = ask(fake, deltas, tools=[WEATHER])
    whole = ask(fake, tools=[WEATHER])
    assert fake.requests[0].json["stream"] is True and "stream" not in fake.requests[1].json
    assert fake.chunks_sent > 10, "the calls' arguments came in fragments"
    assert (
        streamed.tool_calls
        == whole.tool_calls
        == [
            {"id": "call_1", "name": "weather", "arguments": {"city": "Oslo"}},
            {"id": "call_2", "name": "lookup_order", "arguments": {"order_id": "A-1001", "lines": [1, 2]}},
        ]
    )
    assert "".join(deltas) == streamed.text == whole.text == "Checking both."


def delta_chunk(*tool_calls: Any) -> dict[str, Any]:
    return {"model": "tiny-1", "choices": [{"index": 0, "delta": {"tool_calls": list(tool_calls)}}]}


@pytest.mark.parametrize(
    ("chunks", "fragment"),
    [
        (
            [
                delta_chunk({"index": 0, "id": "c1", "function": {"name": "weather", "arguments": ""}}),
                delta_chunk({"index": 0, "function": {"name": f"x-{KEY}", "arguments": "{}"}}),
            ],
            "function.name changed from 'weather' to",
        ),
        ([delta_chunk({"index": 0, "id": "c1", "function": {"arguments": "{}"}})], "has no function name"),
        ([delta_chunk({"index": "first", "function": {"name": "weather"}})], "is not an integer"),
        (
            [{"model": "tiny-1", "choices": [{"index": 0, "delta": {"tool_calls": {"index": 0}}}]}],
            "not a list",
        ),
    ],
)
def test_a_malformed_streamed_tool_call_fails_naming_provider_model_and_node(
    fake: FakeLLMServer, chunks: list[dict[str, Any]], fragment: str
) -> None:
    fake.stream_chunks = chunks
    with pytest.raises(HandlerError) as failed:
        ask(fake, [], tools=[WEATHER])
    message = str(failed.value)
    assert message.startswith("llm.chat node 'n': provider 'acme', model 'tiny-1': a malformed tool call: ")
    assert fragment in message and message.endswith("nothing was kept.")
    assert KEY not in message


def test_tool_arguments_that_are_not_json_are_kept_as_text(fake: FakeLLMServer) -> None:
    def reply(request: Any) -> dict[str, Any]:
        answer = tool_reply(request)
        answer["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = '{"city": '
        return answer

    fake.reply = reply
    assert ask(fake, []).tool_calls[0]["arguments"] == '{"city": '


def test_a_stream_dropped_half_way_fails_naming_provider_model_and_node(fake: FakeLLMServer) -> None:
    fake.drop_after = 3
    with pytest.raises(
        HandlerError,
        match=r"llm.chat node 'n': provider 'acme', model 'tiny-1': the stream ended before \[DONE\]",
    ):
        ask(fake, [])


def test_a_malformed_chunk_fails_clearly(fake: FakeLLMServer) -> None:
    fake.bad_chunk_at = 2
    with pytest.raises(HandlerError, match=r"provider 'acme', model 'tiny-1': a stream chunk is not JSON"):
        ask(fake, [])


@pytest.mark.parametrize("status", [400, 429, 500, 503])
def test_an_error_status_names_the_provider_and_hides_the_key(fake: FakeLLMServer, status: int) -> None:
    fake.status = status
    fake.reply = {"error": {"message": f"bad things; your key {KEY} was seen"}}
    with pytest.raises(HandlerError) as err:
        ask(fake, [])
    message = str(err.value)
    assert f"answered {status}" in message and "provider 'acme', model 'tiny-1'" in message
    assert KEY not in message and "***" in message


def test_a_wrong_key_is_refused_without_showing_it(fake: FakeLLMServer) -> None:
    with pytest.raises(HandlerError, match="answered 401") as err:
        ask(fake, [], endpoint=endpoint(fake, "sk-wrong-1"))
    assert "sk-wrong-1" not in str(err.value)
    assert fake.requests[0].headers["authorization"] == "Bearer sk-wrong-1"


def test_a_silent_provider_times_out(fake: FakeLLMServer) -> None:
    fake.delay = 5
    with pytest.raises(HandlerError, match=r"provider 'acme', model 'tiny-1': POST .* timed out after 0.3 s"):
        ask(fake, [], timeout_seconds=0.3)


def test_a_slow_stream_times_out_between_chunks(fake: FakeLLMServer) -> None:
    fake.chunk_delay = 0.2
    with pytest.raises(HandlerError, match="timed out"):
        ask(fake, [], timeout_seconds=0.5)


def test_options_cannot_override_what_the_client_owns(fake: FakeLLMServer) -> None:
    ask(fake, options={"temperature": 0.1, "model": "other", "stream": True})
    sent = fake.requests[0].json
    assert sent["model"] == "tiny-1" and sent["temperature"] == 0.1 and "stream" not in sent
    assert json.loads(fake.requests[0].body)["messages"][0]["content"] == "tell me a short story"


def test_a_streamed_answer_records_its_time_to_first_token_before_the_rest_came(fake: FakeLLMServer) -> None:
    fake.chunk_delay = 0.1  # six words: the last arrives at least 0.5 s after the first
    done = ask(fake, [])
    assert done.first_token_ms is not None
    assert 0 < done.first_token_ms <= done.latency_ms - 500


def test_an_answer_read_as_one_body_has_no_time_to_first_token(fake: FakeLLMServer) -> None:
    assert ask(fake).first_token_ms is None  # not streamed
    fake.streaming = False
    assert ask(fake, []).first_token_ms is None  # asked to stream, answered in one body


def test_the_trace_context_goes_with_the_call(fake: FakeLLMServer) -> None:
    trace = {
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "tracestate": "switchyard=r:9",
    }
    ask(fake, trace=trace)
    sent = fake.requests[0].headers
    assert (sent["traceparent"], sent["tracestate"]) == (trace["traceparent"], "switchyard=r:9")


def test_a_429_carries_the_providers_fault_with_its_retry_after_in_seconds_or_as_a_date(
    fake: FakeLLMServer,
) -> None:
    fake.outage(0.0, 503, then_429_seconds=60.0, retry_after=7)
    with pytest.raises(CallFailed) as seconds:
        ask(fake)
    assert seconds.value.fault is not None and seconds.value.fault.status == 429
    assert seconds.value.fault.retry_after == 7.0

    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    fake.outage(0.0, 503, then_429_seconds=60.0, retry_after=when)
    with pytest.raises(CallFailed) as dated:
        ask(fake)
    assert dated.value.fault is not None and 28 < (dated.value.fault.retry_after or 0) <= 30


def test_a_refusal_of_the_request_is_no_fault_of_the_provider_and_a_5xx_or_a_lost_connection_is(
    fake: FakeLLMServer,
) -> None:
    with pytest.raises(CallFailed) as refused:
        ask(fake, endpoint=endpoint(fake, key="sk-wrong"))  # 401
    assert refused.value.fault is None and refused.value.retryable is False
    fake.outage(60.0, 503)
    with pytest.raises(CallFailed) as failed:
        ask(fake)
    assert failed.value.fault is not None and failed.value.fault.status == 503
    gone = Endpoint("acme", "http://127.0.0.1:9/v1", KEY, "tiny-1", 5.0, False)  # nothing listens on 9
    with pytest.raises(CallFailed) as lost:
        ask(fake, endpoint=gone)
    assert lost.value.fault is not None and lost.value.fault.status is None
