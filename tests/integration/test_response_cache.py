"""The response cache (handlers/caching.py) with real workers and the fake provider counting
calls: identical llm.chat calls within the TTL make one provider call; past it, a new one."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from tests.fakes.llm_server import FakeLLMServer
from tests.integration.conftest import publish, two_workers_and_a_scheduler, wait_finished
from tests.integration.runtime import Runtime
from tests.integration.test_http_handlers import Routes, Scripted, ctx, http, url
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


@pytest.fixture
def web() -> Iterator[Scripted]:
    """test_http_handlers' scripted server (its /json answers a JSON body)."""
    httpd = Scripted(("127.0.0.1", 0), Routes)
    httpd.seen, httpd.stopping = [], threading.Event()
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield httpd
    httpd.stopping.set()
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


def test_identical_http_gets_make_one_request_and_the_second_names_the_run_that_paid(web: Scripted) -> None:
    server = web
    run = runs.start_run(publish("get-cache", {"nodes": [{"id": "call_api", "handler": "core.noop"}]}), {})[0]
    row = NodeRun.objects.get(run=run)
    config = {"url": url(server, "/json"), "cache": {"ttl_s": 60}, "headers": {"X-Tenant": "t-1"}}

    first = http(ctx(config, run_id=run.pk, node_run_id=row.pk))
    second = http(
        ctx(config, run_id=run.pk, node_run_id=row.pk, attempt=3, idempotency_key=f"{run.pk}:call_api:3")
    )
    other = http(ctx({**config, "headers": {"X-Tenant": "t-2"}}, run_id=run.pk, node_run_id=row.pk))

    assert len(server.seen) == 2, "the second GET was answered from the cache; another tenant's was not"
    assert "cached" not in first and "cached" not in other
    assert second["cached"]["run"] == run.pk
    assert {k: v for k, v in second.items() if k != "cached"} == first


def test_an_agent_turn_identical_to_a_cached_one_is_answered_without_a_call(
    llm_runtime: Runtime, llm: FakeLLMServer
) -> None:
    agent = {
        "id": "ask",
        "handler": "llm.agent",
        "config": {"prompt": "Answer {input.who}.", "tools": [], "cache": {"ttl_s": 600}},
    }
    workflow = publish("cached-agent", {"nodes": [agent]})
    first, second = ask(workflow), ask(workflow)

    assert len(llm.requests) == 1
    assert second["content"] == first["content"]
    steps = list(LLMCall.objects.filter(workflow_id=workflow.pk).order_by("id").values_list("step", "cost"))
    assert steps == [("turn 1", steps[0][1]), ("cached turn 1", Decimal(0))]
