"""The response cache (handlers/caching.py) with real workers and the fake provider counting
calls: identical llm.chat calls within the TTL make one provider call; past it, a new one."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from tests.fakes.llm_server import FakeLLMServer
from tests.integration.conftest import publish, two_workers_and_a_scheduler, wait_finished
from tests.integration.runtime import Runtime
from workflows.runs import actions as runs
from workflows.store.models import CachedResponse, LLMCall, NodeRun, Run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


@pytest.fixture
def llm_runtime(transactional_db: Any, redis_clean: None, llm: FakeLLMServer) -> Iterator[Runtime]:
    yield from two_workers_and_a_scheduler(LLM_BASE_URL=llm.base_url, LLM_MODEL="fake-model")


def ask(workflow: Any, who: str = "Ada") -> dict[str, Any]:
    run = wait_finished(runs.start_run(workflow, {"who": who})[0], 60)
    assert run.status == "succeeded"
    output = NodeRun.objects.get(run=run, node_id="ask").output
    assert isinstance(output, dict)
    return output


def cached_chat() -> Any:
    node = {
        "id": "ask",
        "handler": "llm.chat",
        "config": {"prompt": "Greet {input.who}.", "cache": {"ttl_s": 600}},
    }
    return publish("cached-chat", {"nodes": [node]})


def test_two_identical_cached_calls_make_one_provider_call_and_the_second_says_so(
    llm_runtime: Runtime, llm: FakeLLMServer
) -> None:
    workflow = cached_chat()
    first = ask(workflow)
    second = ask(workflow)

    assert len(llm.requests) == 1
    assert "cached" not in first
    first_run = Run.objects.filter(workflow=workflow).order_by("id").first()
    assert first_run is not None
    assert second["cached"]["run"] == first_run.pk and second["cached"]["node"] == "ask"
    assert second["content"] == first["content"] and second["usage"] == first["usage"]
    paid, saved = LLMCall.objects.filter(workflow_id=workflow.pk).order_by("id")
    assert saved.step == "cached" and saved.cost == Decimal(0)
    assert (saved.input_tokens, saved.output_tokens) == (paid.input_tokens, paid.output_tokens)

    ask(workflow, "Grace")  # another prompt is another request
    assert len(llm.requests) == 2


def test_past_its_ttl_an_entry_is_not_used_and_the_retention_duty_removes_it(
    llm_runtime: Runtime, llm: FakeLLMServer
) -> None:
    from workflows.handlers import caching

    workflow = cached_chat()
    ask(workflow)
    CachedResponse.objects.update(expires_at=timezone.now())  # its TTL has passed

    assert "cached" not in ask(workflow)
    assert len(llm.requests) == 2
    CachedResponse.objects.update(expires_at=timezone.now())
    assert caching.prune_expired() == 1
    assert not CachedResponse.objects.exists()
