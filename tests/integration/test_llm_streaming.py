"""llm.chat end to end: real workers, scheduler and Daphne against the fake provider.

Streaming into Redis and out of the SSE endpoint (replay, then follow, then the output),
failures of the provider (named, key redacted, retried per policy, recorded), a worker killed
mid-stream (a new attempt, never a spliced text), and the cost of each call.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model

from tests.fakes.llm_server import FakeLLMServer
from tests.integration.conftest import publish, wait_finished, worker_scheduler_and_daphne
from tests.integration.runtime import Runtime, wait_for
from workflows.integrations import keys
from workflows.llm import follow, streams, usage
from workflows.runs import actions as runs
from workflows.runtime import epochs
from workflows.store.models import LLMCall, LLMPrice, LLMProvider, NodeRun, Run

KEY = "sk-fake-provider-key-31337"
STORY = " ".join(f"word{n}" for n in range(40))


@pytest.fixture
def fake() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(api_key=KEY, reply=story) as server:
        yield server


def story(request: Any) -> dict[str, Any]:
    return {
        "model": "tiny-1",
        "choices": [{"message": {"role": "assistant", "content": STORY}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 40},
    }


@pytest.fixture
def provider(fake: FakeLLMServer, transactional_db: Any) -> LLMProvider:
    return LLMProvider.objects.create(
        name="fakeco", base_url=fake.base_url, api_key=KEY, default_model="tiny-1", is_default=True
    )


@pytest.fixture
def stack(transactional_db: Any, provider: LLMProvider) -> Iterator[tuple[Runtime, str]]:
    """One worker, one scheduler and Daphne."""
    yield from worker_scheduler_and_daphne()


def chat_workflow(slug: str = "ask", max_attempts: int = 1, timeout: float = 60) -> Any:
    retry = {"max_attempts": max_attempts, "backoff_seconds": 0.1}
    config = {"prompt": "Tell a story about {input.topic}", "timeout_seconds": 10}
    node = {"id": "ask", "handler": "llm.chat", "config": config, "retry": retry, "timeout_seconds": timeout}
    return publish(slug, {"nodes": [node], "edges": []})


def api_key() -> str:
    owner = get_user_model().objects.create_user("reader")
    from django.contrib.auth.models import Group

    owner.groups.add(Group.objects.get_or_create(name="viewer")[0])
    return keys.create_key(owner, "sse", ["read"])[1]


def sse_events(url: str, token: str, **headers: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """Yield (event, id, data) from an SSE endpoint until it closes."""
    with httpx.stream(
        "GET", url, headers={"Authorization": f"Bearer {token}", **headers}, timeout=30
    ) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        fields: dict[str, str] = {}
        for line in response.iter_lines():
            if line:
                name, _, value = line.partition(": ")
                fields[name] = value
            elif "event" in fields:
                yield fields["event"], fields.get("id", ""), json.loads(fields["data"])
                fields = {}


def streamed_text(node: NodeRun, attempt: int) -> str:
    return streams.read_text(node.pk, attempt)[0]


def test_the_sse_endpoint_replays_what_streamed_then_follows_then_ends_with_the_output(
    stack: tuple[Runtime, str], fake: FakeLLMServer
) -> None:
    _, base = stack
    fake.chunk_delay = 0.1
    run, _ = runs.start_run(chat_workflow(), {"topic": "trains"})
    node = wait_for(lambda: NodeRun.objects.filter(run=run, node_id="ask").first(), what="the node row")
    wait_for(lambda: len(streamed_text(node, 1).split()) >= 5, 30, "some text to stream first")
    url = f"{base}/api/v1/runs/{run.pk}/nodes/ask/attempts/1/stream"
    events = list(sse_events(url, api_key()))
    texts = [data for name, _, data in events if name == "text"]
    assert texts[0]["offset"] == 0, "the replay starts at the beginning"
    assert [t["offset"] for t in texts] == sorted(t["offset"] for t in texts)
    assert len(texts) >= 3, "several pieces: the replayed one and those that followed live"
    assert "".join(t["text"] for t in texts) == STORY
    name, _, end = events[-1]
    assert name == "end" and end["output"]["content"] == STORY
    assert end["output"]["finish_reason"] == "stop" and end["output"]["usage"]["output_tokens"] == 40
    # The stream's end is written when the provider's answer is complete, a moment before the
    # worker commits the attempt's result: the node's output is the same once it is stored.
    wait_for(lambda: NodeRun.objects.get(pk=node.pk).status == "succeeded", 30, "the attempt's result")
    node.refresh_from_db()
    assert node.output == end["output"]
    assert fake.requests[0].json["stream"] is True


def test_last_event_id_resumes_after_what_the_client_has(
    stack: tuple[Runtime, str], fake: FakeLLMServer
) -> None:
    _, base = stack
    # Pieces apart in time: an answer that arrives in one read is written as one piece.
    fake.chunk_delay = 0.03
    run, _ = runs.start_run(chat_workflow(), {"topic": "ships"})
    wait_finished(run)
    url = f"{base}/api/v1/runs/{run.pk}/nodes/ask/attempts/1/stream"
    token = api_key()
    everything = list(sse_events(url, token))
    assert len(everything) >= 3, everything
    middle = len(everything) // 2
    rest = list(sse_events(url, token, **{"Last-Event-ID": everything[middle][1]}))
    assert rest == everything[middle + 1 :]


def test_a_client_following_an_attempt_not_begun_gets_its_headers_at_once(
    stack: tuple[Runtime, str],
) -> None:
    """Daphne sends headers with the first piece of the body: the endpoint opens with one."""
    _, base = stack
    run, _ = runs.start_run(chat_workflow(), {"topic": "x"})
    wait_finished(run)
    url = f"{base}/api/v1/runs/{run.pk}/nodes/ask/attempts/2/stream"  # a rerun's, not begun
    headers = {"Authorization": f"Bearer {api_key()}"}
    with httpx.stream("GET", url, headers=headers, timeout=5) as response:
        assert response.status_code == 200
        assert next(response.iter_lines()) == "retry: 2000"


def test_a_quiet_follower_sends_keep_alives_until_the_attempt_begins(
    provider: LLMProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(follow, "KEEPALIVE_SECONDS", 2.0)
    run, _ = runs.start_run(chat_workflow(), {"topic": "x"})  # no worker: it stays queued
    node = NodeRun.objects.get(run=run, node_id="ask")

    async def first_two() -> list[follow.Event]:
        events = follow.follow(node.pk, 1)
        try:
            return [await anext(events), await anext(events)]
        finally:
            await events.aclose()

    started = time.monotonic()
    events = async_to_sync(first_two)()
    assert [e.encode() for e in events] == [": keep-alive\n\n"] * 2
    assert time.monotonic() - started >= 4.0, "one every KEEPALIVE_SECONDS of quiet"


def test_an_unknown_node_is_a_404_problem_and_a_key_is_needed(stack: tuple[Runtime, str]) -> None:
    _, base = stack
    run, _ = runs.start_run(chat_workflow(), {"topic": "x"})
    missing = httpx.get(
        f"{base}/api/v1/runs/{run.pk}/nodes/nope/attempts/1/stream",
        headers={"Authorization": f"Bearer {api_key()}"},
        timeout=60,
    )
    assert missing.status_code == 404 and missing.headers["content-type"] == "application/problem+json"
    assert (
        httpx.get(f"{base}/api/v1/runs/{run.pk}/nodes/ask/attempts/1/stream", timeout=60).status_code == 401
    )


@pytest.mark.parametrize(
    ("script", "fragment", "attempts"),
    [
        ({"status": 503}, "answered 503", 2),
        ({"status": 400}, "answered 400", 1),  # the request's fault: no retry can fix it
        ({"drop_after": 4}, "the stream ended before [DONE]", 2),
        ({"bad_chunk_at": 3}, "a stream chunk is not JSON", 2),
    ],
)
def test_a_failing_provider_fails_the_node_clearly_and_is_retried_per_policy(
    stack: tuple[Runtime, str], fake: FakeLLMServer, script: dict[str, Any], fragment: str, attempts: int
) -> None:
    for name, value in script.items():
        setattr(fake, name, value)
    if "status" in script:
        fake.reply = {"error": {"message": f"provider trouble; key {KEY}"}}
    run = wait_finished(runs.start_run(chat_workflow(max_attempts=2), {"topic": "x"})[0])
    node = NodeRun.objects.get(run=run, node_id="ask")
    assert run.status == "failed" and node.status == "dead" and node.attempt == attempts
    assert len(fake.requests) == attempts, "retried per the node's policy, unless no retry can fix it"
    assert "llm.chat node 'ask': provider 'fakeco', model 'tiny-1'" in node.error and fragment in node.error
    assert KEY not in node.error and KEY not in node.traceback
    calls = list(LLMCall.objects.filter(run=run).order_by("attempt"))
    assert [c.attempt for c in calls] == list(range(1, attempts + 1)) and all(
        fragment in c.error for c in calls
    )
    end = streams.read_text(node.pk, attempts)[1]
    assert end is not None and fragment in end["error"]


def test_a_follower_of_an_attempt_whose_retry_is_due_is_sent_to_the_next_attempt(
    stack: tuple[Runtime, str], fake: FakeLLMServer
) -> None:
    fake.status, fake.reply = 500, {"error": {"message": "down"}}
    node_def = {
        "id": "ask",
        "handler": "llm.chat",
        "config": {"prompt": "hi"},
        "retry": {"max_attempts": 2, "backoff_seconds": 600},
    }
    run, _ = runs.start_run(publish("later", {"nodes": [node_def], "edges": []}), {})
    node = wait_for(
        lambda: NodeRun.objects.filter(run=run, node_id="ask", status="retrying").first(), 30, "the retry"
    )
    end = follow.node_state(node.pk, 1)
    assert end is not None and (end["abandoned"], end["next_attempt"], end["status"]) == (True, 2, "retrying")
    assert "provider 'fakeco'" in end["error"]
    assert follow.node_state(node.pk, 2) is None, "attempt 2 has not begun: its follower waits"


def test_a_provider_that_times_out_fails_naming_it(stack: tuple[Runtime, str], fake: FakeLLMServer) -> None:
    fake.delay = 30
    run = wait_finished(runs.start_run(chat_workflow(), {"topic": "x"})[0])
    node = NodeRun.objects.get(run=run, node_id="ask")
    assert "provider 'fakeco', model 'tiny-1'" in node.error and "timed out after 10 s" in node.error


def test_a_worker_killed_mid_stream_restarts_the_text_in_a_new_attempt(
    stack: tuple[Runtime, str], fake: FakeLLMServer
) -> None:
    rt, base = stack
    fake.chunk_delay = 0.15
    run, _ = runs.start_run(chat_workflow(max_attempts=2), {"topic": "x"})
    node = wait_for(lambda: NodeRun.objects.filter(run=run, node_id="ask").first(), what="the node row")
    wait_for(lambda: len(streamed_text(node, 1).split()) >= 5, 30, "attempt 1 to stream")
    rt.kill("worker-1", signal.SIGKILL)
    fake.chunk_delay = 0.0
    rt.worker("worker-2")
    url = f"{base}/api/v1/runs/{run.pk}/nodes/ask/attempts/1/stream"
    first = list(sse_events(url, api_key()))
    assert first[-1][0] == "end" and first[-1][2]["abandoned"] is True and first[-1][2]["next_attempt"] == 2
    partial = "".join(d["text"] for n, _, d in first if n == "text")
    assert partial and STORY.startswith(partial) and partial != STORY
    run = wait_finished(run)
    node.refresh_from_db()
    assert run.status == "succeeded" and node.attempt == 2
    assert streamed_text(node, 2) == STORY == node.output["content"], (
        "attempt 2 started over: nothing spliced"
    )


def test_each_call_is_recorded_with_its_cost_from_the_price_table(stack: tuple[Runtime, str]) -> None:
    LLMPrice.objects.create(
        model="tiny-1", input_per_million=Decimal("1000"), output_per_million=Decimal("2000")
    )
    run = wait_finished(runs.start_run(chat_workflow(), {"topic": "x"})[0])
    (call,) = LLMCall.objects.filter(run=run)
    assert (call.provider, call.model, call.input_tokens, call.output_tokens) == ("fakeco", "tiny-1", 12, 40)
    assert call.cost == Decimal("0.092") and call.latency_ms > 0 and call.finish_reason == "stop"
    totals = usage.run_totals(run.pk)
    assert totals.cost == Decimal("0.092") and totals.cost_text == "0.0920" and totals.tokens == 52
    LLMPrice.objects.all().delete()
    # The contract: a change counts in every other process within SAME_EPOCH_SECONDS (the
    # worker may have read the prices' epoch for the first run's call just now).
    time.sleep(epochs.SAME_EPOCH_SECONDS)
    second = wait_finished(runs.start_run(Run.objects.get(pk=run.pk).workflow, {"topic": "y"})[0])
    assert LLMCall.objects.get(run=second).cost is None
    assert usage.run_totals(second.pk).cost_text == "unknown"
    both = usage.workflow_totals(run.workflow_id)
    assert both.cost == Decimal("0.092") and both.unpriced == 1 and both.cost_text == "0.0920 (+1 unpriced)"
