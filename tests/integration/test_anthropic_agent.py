"""Providers of the Anthropic kind end to end: real workers and scheduler, a fake of the
Messages API on a local socket. An agent's tool use over several turns, usage and cost in
the call records, the trace context on each call, a 429 retried and a 400 not."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.anthropic_server import FakeAnthropicServer, message
from tests.integration import agent_tools  # noqa: F401  (registers the test tools here too)
from tests.integration.conftest import publish, two_workers_and_a_scheduler, wait_finished
from tests.integration.runtime import Runtime
from workflows.llm import catalog
from workflows.runs import actions as runs
from workflows.secrets import catalog as secrets
from workflows.store import traceids
from workflows.store.models import DeadLetter, LLMCall, NodeRun

MODULES = "workflows.handlers.builtin,workflows.handlers.demo,tests.integration.agent_tools"
KEY = "sk-ant-e2e-secret"
MODEL = "claude-sonnet-4-5"  # on the shipped price list: 3 and 15 per million tokens


@pytest.fixture
def claude(transactional_db: Any) -> Iterator[FakeAnthropicServer]:
    """The fake Messages API as the default provider, its key in the secrets store (the
    workers read it at call time: the fake refuses any other key)."""
    with FakeAnthropicServer(api_key=KEY) as fake:
        secrets.set_secret("CLAUDE_KEY", KEY)
        change = catalog.ProviderChange(
            name="claude",
            kind="anthropic",
            base_url=fake.base_url,
            default_model=MODEL,
            is_default=True,
            api_key="{secret.CLAUDE_KEY}",
        )
        catalog.save_provider(change)
        yield fake


@pytest.fixture
def workers(claude: FakeAnthropicServer, redis_clean: None) -> Iterator[Runtime]:
    yield from two_workers_and_a_scheduler(SWITCHYARD_HANDLER_MODULES=MODULES)


def turn_of(request: dict[str, Any]) -> int:
    return 1 + sum(1 for m in request["messages"] if m["role"] == "assistant")


def three_turns(request: dict[str, Any]) -> dict[str, Any]:
    """Turn 1 and 2 each use a tool; turn 3 answers. Turn 2 reports prompt-cache reads."""
    turn = turn_of(request)
    if turn == 1:
        return message("", ("toolu_a", "test__record", {"note": "first"}), model=MODEL + "-20250929")
    if turn == 2:
        usage = {"input_tokens": 30, "output_tokens": 12, "cache_read_input_tokens": 1000}
        return message("One more.", ("toolu_b", "test__record", {"note": "second"}), usage=usage)
    return message("Both notes are recorded.", usage={"input_tokens": 50, "output_tokens": 6})


def test_an_agent_uses_tools_over_several_turns_through_the_messages_api(
    workers: Runtime, claude: FakeAnthropicServer, tmp_path: Path
) -> None:
    claude.reply = three_turns
    log = tmp_path / "tools.log"
    agent = {
        "id": "agent",
        "handler": "llm.agent",
        "config": {"system": "You keep notes.", "prompt": "Note for {input.who}.", "tools": ["test.record"]},
    }
    run, _ = runs.start_run(
        publish("claude-agent", {"nodes": [agent], "edges": []}), {"who": "ada", "log": str(log)}
    )
    assert wait_finished(run).status == "succeeded"
    output = NodeRun.objects.get(run=run, node_id="agent").output
    assert output["content"] == "Both notes are recorded."
    assert [line.split()[-1] for line in log.read_text().splitlines()] == ["first", "second"]

    assert len(claude.requests) == 3
    last = claude.requests[2].json
    assert last["system"] == "You keep notes."
    assert last["tools"][0]["name"] == "test__record" and "input_schema" in last["tools"][0]
    assert [m["role"] for m in last["messages"]] == ["user", "assistant", "user", "assistant", "user"]
    results = [b for m in last["messages"] for b in m["content"] if b["type"] == "tool_result"]
    assert [r["tool_use_id"] for r in results] == ["toolu_a", "toolu_b"]
    assert json.loads(results[0]["content"]) == {"noted": "first"}

    calls = list(LLMCall.objects.filter(run=run).order_by("id"))
    assert [(c.provider, c.model, c.finish_reason) for c in calls] == [
        ("claude", MODEL, "tool_calls"),
        ("claude", MODEL, "tool_calls"),
        ("claude", MODEL, "stop"),
    ]
    assert calls[0].response_model == MODEL + "-20250929"
    assert [(c.input_tokens, c.output_tokens) for c in calls] == [(10, 1), (1030, 12), (50, 6)]
    assert (calls[1].cache_read_tokens, calls[1].cache_write_tokens) == (1000, None)
    assert calls[2].cost == (50 * Decimal(3) + 6 * Decimal(15)) / 1_000_000
    assert all(c.first_token_ms is not None for c in calls)  # the agent streams its turns

    expected = traceids.trace_headers(run.pk, "agent", 1)
    for request in claude.requests:
        assert request.headers["traceparent"] == expected["traceparent"]
        assert request.headers["tracestate"] == f"switchyard=r:{run.pk}"
        assert request.headers["x-api-key"] == KEY


def chat_flow(max_attempts: int) -> dict[str, Any]:
    chat = {
        "id": "ask",
        "handler": "llm.chat",
        "config": {"prompt": "Hello {input.who}"},
        "retry": {"max_attempts": max_attempts, "backoff_seconds": 0.1},
    }
    return {"nodes": [chat], "edges": []}


def test_a_429_is_retried_and_the_next_attempt_succeeds(
    workers: Runtime, claude: FakeAnthropicServer
) -> None:
    claude.errors = [
        (429, "rate_limit_error", {"retry-after": "0", "anthropic-ratelimit-tokens-remaining": "0"})
    ]
    run, _ = runs.start_run(publish("claude-429", chat_flow(2)), {"who": "bo"})
    assert wait_finished(run).status == "succeeded"
    assert NodeRun.objects.get(run=run, node_id="ask").output["content"] == "echo: Hello bo"
    first, second = LLMCall.objects.filter(run=run).order_by("id")
    assert "answered 429 rate_limit_error (retry-after 0 s)" in first.error and first.attempt == 1
    assert second.error == "" and second.attempt == 2
    assert len(claude.requests) == 2


def test_a_400_is_not_retried(workers: Runtime, claude: FakeAnthropicServer) -> None:
    claude.errors = [(400, "invalid_request_error", {})]
    run, _ = runs.start_run(publish("claude-400", chat_flow(3)), {"who": "cy"})
    assert wait_finished(run).status == "failed"
    letter = DeadLetter.objects.get(run=run)
    assert "400" in letter.error and "invalid_request_error" in letter.error
    assert len(claude.requests) == 1  # three attempts allowed, one made
