"""Failures that no retry can fix are dead after one attempt; every handler failure keeps its
traceback. Real workers and scheduler; the provider is a fake on a local socket."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.llm_server import FakeLLMServer
from tests.integration.conftest import node, publish, two_workers_and_a_scheduler, wait_finished
from tests.integration.runtime import Runtime
from workflows.handlers.demo import DEMO_RETRIES
from workflows.runs import actions as runs
from workflows.store.models import DeadLetter, MapItem, NodeRun, Run, RunEvent

RETRY = {"max_attempts": 3, "backoff_seconds": 0.2}


def welcome_flow(prompt: str = "Hello {input.name}.") -> dict[str, Any]:
    """One llm.chat node with a budget of three attempts, and no input schema."""
    return {"nodes": [node("welcome", "llm.chat", config={"prompt": prompt}, retry=RETRY)]}


def retries_scheduled(run: Run, node_id: str) -> int:
    return RunEvent.objects.filter(run=run, node_id=node_id, kind="node.retry_scheduled").count()


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(api_key="sk-the-right-one") as fake:
        yield fake


@pytest.fixture
def llm_runtime(transactional_db: Any, redis_clean: None, llm: FakeLLMServer) -> Iterator[Runtime]:
    """Two workers and a scheduler whose default provider is the fake, with a key it refuses."""
    yield from two_workers_and_a_scheduler(
        LLM_BASE_URL=llm.base_url, LLM_MODEL="fake-model", LLM_API_KEY="sk-a-wrong-one"
    )


def test_a_placeholder_the_input_lacks_is_dead_after_one_attempt_with_a_sentence_to_act_on(
    llm_runtime: Runtime, llm: FakeLLMServer
) -> None:
    run, _ = runs.start_run(publish("welcome", welcome_flow("Where is order {input.order_id}?")), {})
    assert wait_finished(run).status == "failed"
    welcome = NodeRun.objects.get(run=run, node_id="welcome")
    assert (welcome.status, welcome.attempt, welcome.retryable) == ("dead", 1, False)
    assert retries_scheduled(run, "welcome") == 0, "no backoff for a failure no retry can fix"
    letter = DeadLetter.objects.get(run=run)
    assert "the run's input has no `order_id`; start the run with an input that has it" in letter.error
    assert '{"order_id": "..."}' in letter.error
    assert "render_template" in letter.traceback and "HandlerError" in letter.traceback
    assert llm.requests == [], "nothing was sent to the provider"


def test_a_provider_refusing_the_key_is_dead_after_one_call(llm_runtime: Runtime, llm: FakeLLMServer) -> None:
    run, _ = runs.start_run(publish("welcome", welcome_flow()), {"name": "Ada"})
    assert wait_finished(run).status == "failed"
    welcome = NodeRun.objects.get(run=run, node_id="welcome")
    assert (welcome.status, welcome.attempt) == ("dead", 1)
    assert "answered 401" in welcome.error and "Check the provider's API key" in welcome.error
    assert len(llm.requests) == 1, "the refused call was not paid for again"
    assert retries_scheduled(run, "welcome") == 0


def test_a_provider_that_is_down_is_still_retried_with_backoff(
    llm_runtime: Runtime, llm: FakeLLMServer
) -> None:
    llm.api_key, llm.status = None, 503
    run, _ = runs.start_run(publish("welcome", welcome_flow()), {"name": "Ada"})
    assert wait_finished(run).status == "failed"
    welcome = NodeRun.objects.get(run=run, node_id="welcome")
    assert (welcome.status, welcome.attempt, welcome.retryable) == ("dead", 3, True)
    assert retries_scheduled(run, "welcome") == 2 and len(llm.requests) == 3


def test_a_handler_error_keeps_its_traceback_on_the_attempt_and_the_dead_letter(
    runtime: Runtime,
) -> None:
    run, _ = runs.start_run(publish("demo-retries", DEMO_RETRIES), {})
    assert wait_finished(run).status == "failed"
    fails = NodeRun.objects.get(run=run, node_id="always_fails")
    assert fails.attempt == 2, "a HandlerError is retryable unless it says not"
    letter = DeadLetter.objects.get(run=run)
    for traceback in (fails.traceback, letter.traceback):
        assert traceback.startswith("Traceback (most recent call last):")
        assert 'workflows/handlers/builtin.py", line' in traceback and "in fail" in traceback
        assert traceback.rstrip().endswith("HandlerError: upstream API is down (drill)")


def test_a_map_item_that_no_retry_can_fix_is_dead_after_one_attempt(runtime: Runtime) -> None:
    fetch = node(
        "fetch",
        "http.request",
        config={"url": "https://example.test/orders/{input.order_id}"},
        map="input.pages",
        on_item_failure="continue",
        retry=RETRY,
    )
    run, _ = runs.start_run(publish("pages", {"nodes": [fetch]}), {"pages": [1, 2]})
    wait_finished(run)
    items = list(MapItem.objects.filter(node_run__run=run).order_by("index"))
    assert [(i.status, i.attempt, i.retryable) for i in items] == [("dead", 1, False)] * 2
    letters = DeadLetter.objects.filter(run=run).order_by("id")
    assert all("the run's input has no `order_id`" in letter.error for letter in letters)
    assert all("render_template" in letter.traceback for letter in letters)
