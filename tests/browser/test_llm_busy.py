"""Streamed tokens under load, in a real browser: one run's text reaches its page while 200
other LLM calls stream in the same two workers' slots (issue 23; latency figures: bench/)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.fakes.llm_server import FakeLLMServer
from tests.integration.conftest import publish
from tests.integration.runtime import Runtime, wait_for
from workflows.runs import actions as runs
from workflows.runtime import bus
from workflows.store.models import LLMProvider, NodeRun

OTHERS = 200
WORDS = 600  # per stream: at CHUNK_DELAY each, every stream lasts 30 s or more
CHUNK_DELAY = 0.05  # 20 tokens/s, the provider


def story(request: Any) -> dict[str, Any]:
    """The watched run's answer is `token<n>`s, every other run's `bg<n>`s."""
    watched = "watched" in json_text(request)
    words = " ".join(f"{'token' if watched else 'bg'}{n}" for n in range(WORDS))
    return {
        "model": "tiny-1",
        "choices": [{"message": {"role": "assistant", "content": words}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": WORDS},
    }


def json_text(request: Any) -> str:
    return str(request.get("messages", "")) if isinstance(request, dict) else ""


@pytest.fixture
def fake(transactional_db: None) -> Iterator[FakeLLMServer]:
    with FakeLLMServer(reply=story, chunk_delay=CHUNK_DELAY, gated=True) as server:
        LLMProvider.objects.create(
            name="fakeco", base_url=server.base_url, default_model="tiny-1", is_default=True
        )
        yield server


@pytest.fixture
def busy_runtime(transactional_db: None) -> Iterator[Runtime]:
    """Two workers with a slot for every stream and some to spare, a scheduler, the broadcaster."""
    bus.client().flushdb()
    bus.ensure_group()
    rt = Runtime(SWITCHYARD_MONITOR_INTERVAL_SECONDS="0.2", SWITCHYARD_WORKER_SLOTS=str(OTHERS // 2 + 20))
    rt.worker("worker-1")
    rt.worker("worker-2")
    rt.scheduler("scheduler-1")
    rt.broadcaster("broadcaster")
    yield rt
    rt.stop()


def test_tokens_of_one_run_reach_its_run_page_while_two_hundred_other_streams_run(
    busy_runtime: Runtime, fake: FakeLLMServer, page_as: Any, live_url: str, screenshot: Any
) -> None:
    node = {"id": "ask", "handler": "llm.chat", "config": {"prompt": "Tell me about {input.topic}"}}
    workflow = publish("asker", {"nodes": [node], "edges": []})
    for n in range(OTHERS):
        runs.start_run(workflow, {"topic": f"background {n}"})
    run, _ = runs.start_run(workflow, {"topic": "the watched run"})
    # Every call has reached the provider and waits at its gate: all 201 are in flight at once.
    wait_for(lambda: fake.held == OTHERS + 1, 180, f"{OTHERS + 1} LLM calls to be in flight")
    page = page_as("viewer")
    page.goto(f"{live_url}/runs/{run.pk}/")
    fake.go.set()
    stream = page.locator('#llm-streams [data-stream$=":ask"] pre')
    expect(stream).to_contain_text("token3", timeout=60_000)
    streaming = fake.open_streams
    assert streaming > OTHERS, f"the text arrived after the other streams ended ({streaming} still open)"
    assert NodeRun.objects.get(run=run, node_id="ask").status == "running"
    assert "bg" not in stream.inner_text(), "the run page shows only its own run's text"
    screenshot(page, "run-page-streaming-beside-200")
    fake.stopping.set()  # end the streams: the test is about their middle, not their end
