"""Provider health end to end: real workers (two, sharing one breaker) and the scheduler,
llm.chat runs against fake providers that answer 503, then 429 with Retry-After, and count
every call; breakers in Redis, their decisions in PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from tests.fakes.llm_server import FakeLLMServer
from tests.integration.conftest import publish, two_workers_and_a_scheduler, wait_finished
from tests.integration.runtime import Runtime, wait_for
from workflows.core.states import NodeStatus as N
from workflows.providers_health import breaker, holds as provider_holds
from workflows.providers_health.gate import ProviderGate
from workflows.runs import actions as runs
from workflows.runtime import bus
from workflows.runtime.admission import Call, Fault
from workflows.runtime.kinds import Parked
from workflows.store.models import BreakerDecision, DeadLetter, LLMProvider, NodeRun, Run, Wait, Workflow

FAILURES = 3  # the primary's breaker opens after this many faults in a row


def chat_flow(handler: str = "llm.chat", **config: Any) -> dict[str, Any]:
    node = {
        "id": "ask",
        "handler": handler,
        "config": {"provider": "primary", "prompt": "Answer {input.n}.", "max_tokens": 20, **config},
        "retry": {"max_attempts": 3, "backoff_seconds": 0.2, "jitter": 0},
    }
    return {"nodes": [node], "edges": []}


def provider(name: str, fake: FakeLLMServer, **fields: Any) -> LLMProvider:
    defaults = {"breaker_failures": FAILURES, "breaker_open_seconds": 1.0, "timeout_seconds": 10.0}
    return LLMProvider.objects.create(
        name=name, base_url=fake.base_url, default_model="fake-model", **{**defaults, **fields}
    )


def start(workflow: Workflow, count: int) -> list[Run]:
    return [run for run, _ in runs.start_runs(workflow, [runs.StartItem({"n": n}) for n in range(count)])]


def held_by_provider() -> int:
    return Wait.objects.filter(kind="provider", closed_at__isnull=True).count()


def attempts_spent(workflow: Workflow) -> int:
    """Attempts beyond the first, over every node of the workflow's runs."""
    return sum(
        a - 1 for a in NodeRun.objects.filter(run__workflow=workflow).values_list("attempt", flat=True)
    )


@pytest.fixture
def primary_llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


@pytest.fixture
def backup_llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


@pytest.fixture
def health_runtime(transactional_db: Any, redis_clean: None, primary_llm: FakeLLMServer) -> Iterator[Runtime]:
    yield from two_workers_and_a_scheduler(SWITCHYARD_PROVIDER_RATE_WINDOW_SECONDS="2")


def test_an_outage_opens_the_breaker_holds_every_node_without_spending_attempts_and_all_finish(
    health_runtime: Runtime, primary_llm: FakeLLMServer
) -> None:
    provider("primary", primary_llm)
    workflow = publish("outage", chat_flow())
    # From the first call, whenever a loaded machine gets there; the 429 meets at least the
    # first call after the 503s (a probe), however late it comes.
    primary_llm.outage(
        3.0, 503, then_429_seconds=2.0, retry_after=2, then_429_requests=1, from_first_request=True
    )
    all_finish_having_spent_only_the_faults_before_the_breaker_opened(workflow, start(workflow, 100))
    assert len(set(NodeRun.objects.filter(run__workflow=workflow).values_list("worker", flat=True))) == 2
    decisions = list(BreakerDecision.objects.filter(provider="primary").values_list("decision", flat=True))
    assert decisions[0] == breaker.OPENED and decisions[-1] == breaker.CLOSED_AGAIN
    assert breaker.HALF_OPENED in decisions
    # A probe met the 429: the breaker opened for its Retry-After (2 s), not the 1 s default
    # (`at` is when the row was written, after the decision: a loaded worker writes it late).
    by_429 = BreakerDecision.objects.filter(
        provider="primary", decision=breaker.OPENED, reason__contains="429"
    )
    assert any((d.until - d.at).total_seconds() > 1.0 for d in by_429)
    assert held_by_provider() == 0
    assert breaker.read("primary", "fake-model").state == breaker.CLOSED


def test_agent_turns_that_fail_once_the_breaker_opened_are_held_not_spent(
    health_runtime: Runtime, primary_llm: FakeLLMServer
) -> None:
    """As llm.chat's calls: a turn whose call failed after its provider's breaker opened (the
    burst in flight) holds its attempt rather than spend it (agents/loop.recheck_turn)."""
    provider("primary", primary_llm)
    workflow = publish("agent-outage", chat_flow("llm.agent", tools=[]))
    primary_llm.outage(3.0, 503, from_first_request=True)
    all_finish_having_spent_only_the_faults_before_the_breaker_opened(workflow, start(workflow, 60))
    assert held_by_provider() == 0


def all_finish_having_spent_only_the_faults_before_the_breaker_opened(
    workflow: Workflow, started: list[Run]
) -> None:
    """Shared by both workers: only the faults before the breaker opened spend an attempt;
    every call that failed after it opened (the burst in flight, the failed probes) is held."""
    wait_for(lambda: held_by_provider() > 0, 30, "nodes to be held behind the open breaker")
    for run in started:
        assert wait_finished(run, 90).status == "succeeded"
    assert attempts_spent(workflow) <= FAILURES - 1
    assert DeadLetter.objects.count() == 0


def running_call(workflow: Workflow) -> Call:
    """A call of a new run's node, its attempt running as a worker's claim leaves it."""
    run = start(workflow, 1)[0]
    node = NodeRun.objects.get(run=run)
    NodeRun.objects.filter(pk=node.pk).update(status=N.RUNNING, attempt=1)
    messages = [{"role": "user", "content": "Answer."}]
    return Call(node.pk, run.pk, "ask", 1, "primary", "fake-model", messages, None, 20)


def test_a_failure_reported_after_the_breaker_opened_and_closed_again_counts_for_nothing_and_is_held(
    transactional_db: Any, redis_clean: None, primary_llm: FakeLLMServer
) -> None:
    """On a loaded worker a failure met during the outage can be reported (its slot's sync
    thread behind) after the breaker opened, probed and closed again: it must neither count
    against the recovered provider nor spend its attempt."""
    provider("primary", primary_llm)
    workflow = publish("late-report", chat_flow())
    gate = ProviderGate()
    fault = Fault(503, None, "HTTP 503")
    late = running_call(workflow)
    late_ticket, _ = gate.reserve(late)  # type: ignore[misc]  # goes while the breaker is closed
    for _ in range(FAILURES):
        ticket, _ = gate.reserve(running_call(workflow))  # type: ignore[misc]
        gate.settle(ticket, None, None, ok=False, fault=fault)
    assert breaker.read("primary", "fake-model").state == breaker.OPEN
    until = breaker.read("primary", "fake-model").until
    breaker.force(
        "primary", "fake-model", breaker.OPEN, until - timedelta(seconds=5), "its period ended", None
    )
    probe, _ = gate.reserve(running_call(workflow))  # type: ignore[misc]
    assert breaker.read("primary", "fake-model").state == breaker.HALF_OPEN  # it is the probe
    gate.settle(probe, 10, 3, ok=True)
    assert breaker.read("primary", "fake-model").state == breaker.CLOSED

    gate.settle(late_ticket, None, None, ok=False, fault=fault)
    state = breaker.read("primary", "fake-model")
    assert (state.state, state.failures) == (breaker.CLOSED, 0)  # counted for nothing
    with pytest.raises(Parked):
        gate.recheck(late)  # held, not spent
    assert NodeRun.objects.values_list("status", "attempt").get(pk=late.node_run_id) == (N.WAITING, 1)
    assert provider_holds.offer_held() == 1  # the breaker is closed: released at the same attempt
    assert NodeRun.objects.values_list("status", "attempt").get(pk=late.node_run_id) == (N.QUEUED, 1)


def test_the_fallback_answers_while_the_first_provider_is_out_and_the_output_names_it(
    health_runtime: Runtime, primary_llm: FakeLLMServer, backup_llm: FakeLLMServer
) -> None:
    provider("primary", primary_llm, breaker_open_seconds=120.0)
    provider("backup", backup_llm)
    workflow = publish("fallback", chat_flow(fallbacks=[{"provider": "backup", "model": "fake-model"}]))
    primary_llm.outage(120.0, 503)
    first = [wait_finished(run, 60) for run in start(workflow, 30)]
    asked = len(primary_llm.requests)
    assert breaker.read("primary", "fake-model").state == breaker.OPEN

    # With the primary's breaker open, the next runs go straight to the fallback.
    second = [wait_finished(run, 60) for run in start(workflow, 30)]
    assert {run.status for run in first + second} == {"succeeded"}
    assert len(primary_llm.requests) == asked and primary_llm.refused == asked
    outputs = NodeRun.objects.filter(run__workflow=workflow).values_list("output", flat=True)
    assert {(o["provider"], o["requested_model"]) for o in outputs} == {("backup", "fake-model")}
    assert attempts_spent(workflow) == 0  # a retryable failure went to the fallback, not to a retry
    assert len(backup_llm.requests) == 60


def test_a_redis_flush_while_nodes_are_held_loses_none_the_breaker_is_rebuilt_from_postgres(
    health_runtime: Runtime, primary_llm: FakeLLMServer
) -> None:
    provider("primary", primary_llm, breaker_open_seconds=5.0)
    workflow = publish("flushed", chat_flow())
    primary_llm.outage(3.0, 503)
    started = start(workflow, 40)
    wait_for(
        lambda: NodeRun.objects.filter(run__workflow=workflow, status=N.WAITING).count() >= 30,
        30,
        "most nodes to be held behind the open breaker",
    )
    opened = BreakerDecision.objects.filter(provider="primary", decision=breaker.OPENED).latest("id")

    bus.client().flushdb()
    bus.ensure_group()
    state = breaker.read("primary", "fake-model")  # rebuilt from the latest recorded decision
    assert (state.state, state.until) == (breaker.OPEN, opened.until)
    assert Wait.objects.filter(kind="provider", closed_at__isnull=True).count() >= 30

    for run in started:
        assert wait_finished(run, 90).status == "succeeded"
    assert DeadLetter.objects.count() == 0
    assert attempts_spent(workflow) <= FAILURES - 1


def test_a_requests_per_minute_limit_admits_calls_instead_of_letting_them_meet_429(
    health_runtime: Runtime, primary_llm: FakeLLMServer
) -> None:
    # 150 per minute over the runtime's 2 s window: 5 calls in any 2 s. The fake refuses the
    # 6th within 1.5 s (short of 2 s: a request is counted when admitted and arrives later,
    # by up to the worker's delay in sending it on this loaded machine).
    provider("primary", primary_llm, rpm_limit=150)
    primary_llm.rate_limit(5, 1.5)
    workflow = publish("limited", chat_flow())
    started = start(workflow, 20)

    for run in started:
        assert wait_finished(run, 60).status == "succeeded"
    assert primary_llm.rate_refused == 0
    assert len(primary_llm.requests) == 20
    assert attempts_spent(workflow) == 0
    assert DeadLetter.objects.count() == 0
