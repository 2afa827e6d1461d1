"""What an agent loop costs PostgreSQL, and that what a process remembers never outlives a change.

The loop runs in this process (as a worker's sync path runs it) against the fake provider,
its attempt claimed as the runtime claims it. Its statements are counted; what it remembers
(providers, prices, budgets: runtime/epochs.py) is shown to follow changes made here (the
signals) and in another process. "Another process" is played as tests/api/test_keycache.py
plays it: the change is written with `QuerySet.update()` or `bulk_create()` (no signal reaches
this process), and what the other process's signal does in Redis, `EPOCH.replace()`, is all
this process hears of it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.fakes.llm_server import FakeLLMServer
from tests.integration import agent_tools  # noqa: F401  (registers test.record here)
from tests.integration.conftest import publish
from workflows import handlers
from workflows.agents import loop
from workflows.budgets import ledger
from workflows.core.graph import Node
from workflows.llm import prices, providers
from workflows.runs import actions as runs
from workflows.runtime import admission, bus, epochs
from workflows.store.budgets import Budget
from workflows.store.models import AgentStep, LLMCall, LLMPrice, LLMProvider, NodeRun, Run

pytestmark = pytest.mark.django_db(transaction=True)

TURNS = 3  # turns 1 and 2 call the tool, turn 3 answers: 3 turns and 2 tool calls
# The loop's start: its steps (1; the attempt's run, workflow and node are the worker's
# context's, whose workflow_id comes from the cached version: 2 before), the run's trace
# parent or child link with whether the run replays a fork's or a suite case's calls (1,
# store/runlinks.py: 2 before). Each turn: its step with its
# LLM call and its recorded call (1, agents/steps.py: RECORD_TURN_SQL). Each tool call: its
# step with its recorded call (1). Providers, prices and budgets: none (remembered). 17
# before the step and its call's rows were one statement (3 a turn, 2 a tool call); before
# that, 30: the start also read the provider, and the trace links and the replay mode in two
# statements each; each turn also read the budgets, its attempt's row and its price.
STATEMENTS = 1 + 1 + TURNS + (TURNS - 1)


def completion(turn: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": "done"}
    if turn < TURNS:
        call = {
            "id": f"c{turn}",
            "type": "function",
            "function": {"name": "test__record", "arguments": '{"note": "n"}'},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return {
        "model": "fake-model",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if turn < TURNS else "stop"}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3},
    }


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    def reply(request: Any) -> Any:
        return completion(1 + sum(1 for m in request["messages"] if m["role"] == "assistant"))

    with FakeLLMServer(reply=reply) as fake:
        yield fake


@pytest.fixture
def fleet(llm: FakeLLMServer) -> Any:
    bus.client().flushdb()
    LLMProvider.objects.create(
        name="fleet", base_url=llm.base_url, default_model="fake-model", is_default=True
    )
    node = {
        "id": "agent",
        "handler": "llm.agent",
        "config": {"prompt": "Note for {input.who}", "tools": ["test.record"]},
    }
    return publish("fleet", {"nodes": [node], "edges": []})


def claimed(workflow: Any, tmp_path: Path, who: str) -> tuple[Node, handlers.NodeContext]:
    """Start a run and claim its agent's attempt as the runtime does; its node and context."""
    run, _ = runs.start_run(workflow, {"who": who, "log": str(tmp_path / "tools.log")})
    row = NodeRun.objects.get(run=run, node_id="agent")
    NodeRun.objects.filter(pk=row.pk).update(status="running", attempt=1)
    config = {"prompt": "Note for {input.who}", "tools": ["test.record"]}
    ctx = handlers.NodeContext(
        run_id=run.pk,
        node_id="agent",
        attempt=1,
        idempotency_key=f"{run.pk}:agent:1",
        input=Run.objects.get(pk=run.pk).input,
        upstream={},
        config=config,
        deadline=time.monotonic() + 60,
        node_run_id=row.pk,
        workflow_id=workflow.pk,  # as the worker's context has it (execution.context_for)
    )
    return Node("agent", "llm.agent", config), ctx


def test_an_agent_run_of_three_turns_writes_its_records_and_reads_twice(fleet: Any, tmp_path: Path) -> None:
    assert loop.run_agent(*claimed(fleet, tmp_path, "ana"))["turns"] == TURNS  # remembers what it read
    node, ctx = claimed(fleet, tmp_path, "bo")
    with CaptureQueriesContext(connection) as queries:
        output = loop.run_agent(node, ctx)
    assert output["content"] == "done" and output["turns"] == TURNS
    statements = [q["sql"][:90] for q in queries.captured_queries]
    assert len(statements) == STATEMENTS, json.dumps(statements, indent=1)
    assert AgentStep.objects.filter(node_run_id=ctx.node_run_id).count() == 2 * TURNS - 1
    assert LLMCall.objects.filter(node_run_id=ctx.node_run_id).count() == TURNS


def an_agent_call(run: Run) -> admission.Call:
    node = NodeRun.objects.get(run=run)
    messages = [{"role": "user", "content": "hi"}]
    return admission.Call(node.pk, run.pk, "agent", 1, "fleet", "fake-model", messages, None, None)


def test_no_budget_applies_without_a_statement_and_a_budget_made_elsewhere_counts_from_the_next_call(
    fleet: Any,
) -> None:
    run, _ = runs.start_run(fleet, {"who": "ana"})
    call, now = an_agent_call(run), run.created_at
    assert ledger.worst_cases(call, 100, now) == []
    with CaptureQueriesContext(connection) as queries:
        assert ledger.worst_cases(call, 100, now) == []
    assert queries.captured_queries == []
    Budget.objects.bulk_create(
        [Budget(name="elsewhere", unit="tokens", amount=Decimal(10**6), window="day", scope="global")]
    )
    assert ledger.worst_cases(call, 100, now) == []  # remembered: nothing told this process yet
    ledger.EPOCH.replace()  # what the creating process's signal does
    assert [a.budget.name for a in ledger.worst_cases(call, 100, now)] == ["elsewhere"]


def test_a_budget_saved_here_counts_from_the_next_call_and_one_no_signal_saw_within_fresh_for(
    fleet: Any, monkeypatch: Any
) -> None:
    run, _ = runs.start_run(fleet, {"who": "ana"})
    call, now = an_agent_call(run), run.created_at
    assert ledger.worst_cases(call, 100, now) == []
    Budget.objects.create(name="here", unit="tokens", amount=Decimal(10**6), window="day", scope="global")
    assert [a.budget.name for a in ledger.worst_cases(call, 100, now)] == ["here"]
    Budget.objects.filter(name="here").update(amount=Decimal(5))  # no signal, no epoch
    assert ledger.worst_cases(call, 100, now)[0].budget.amount == 10**6
    monkeypatch.setattr(ledger.EPOCH, "fresh_for", 0.0)  # FRESH_FOR seconds later
    assert ledger.worst_cases(call, 100, now)[0].budget.amount == 5


def test_a_price_is_read_once_and_a_change_counts_from_the_next_call_in_every_process(fleet: Any) -> None:
    LLMPrice.objects.create(model="fake-model", input_per_million=Decimal(1), output_per_million=Decimal(2))
    assert prices.cost_of("fleet", "fake-model", 10**6, 0) == 1
    with CaptureQueriesContext(connection) as queries:
        assert prices.cost_of("fleet", "fake-model", 10**6, 0) == 1
    assert queries.captured_queries == []
    LLMPrice.objects.filter(model="fake-model").update(input_per_million=Decimal(3))  # another process
    assert prices.cost_of("fleet", "fake-model", 10**6, 0) == 1
    providers.EPOCH.replace()  # what that process's signal does
    assert prices.cost_of("fleet", "fake-model", 10**6, 0) == 3
    price = LLMPrice.objects.get(model="fake-model")
    price.input_per_million = Decimal(4)
    price.save()  # here: the signal
    assert prices.cost_of("fleet", "fake-model", 10**6, 0) == 4


def test_a_provider_changed_elsewhere_is_resolved_afresh_and_nothing_is_trusted_without_redis(
    fleet: Any, monkeypatch: Any
) -> None:
    assert providers.resolve("fleet", None).model == "fake-model"
    LLMProvider.objects.filter(name="fleet").update(default_model="other-model")
    assert providers.resolve("fleet", None).model == "fake-model"
    providers.EPOCH.replace()
    assert providers.resolve("fleet", None).model == "other-model"
    monkeypatch.setattr(epochs, "SAME_EPOCH_SECONDS", 0.0)  # the epoch read above is trusted no longer
    monkeypatch.setattr(bus.client(), "get", broken_redis)
    with CaptureQueriesContext(connection) as queries:
        assert providers.resolve("fleet", None).model == "other-model"
    assert len(queries.captured_queries) == 1


def test_an_epoch_is_trusted_within_its_window_and_another_process_s_change_counts_after_it(
    fleet: Any, monkeypatch: Any
) -> None:
    client, read = bus.client(), []
    real_get = client.get
    monkeypatch.setattr(client, "get", lambda key: read.append(key) or real_get(key))  # counts, then reads
    monkeypatch.setattr(epochs, "SAME_EPOCH_SECONDS", 60.0)  # a window no loaded machine outlasts
    assert providers.resolve("fleet", None).model == "fake-model"
    LLMProvider.objects.filter(name="fleet").update(default_model="other-model")
    client.set(providers.EPOCH.key, "replaced-elsewhere")  # another process's signal, alone
    read.clear()
    assert (providers.resolve("fleet", None).model, read) == ("fake-model", [])  # the epoch is trusted
    monkeypatch.setattr(epochs, "SAME_EPOCH_SECONDS", 0.0)  # the window has passed
    assert providers.resolve("fleet", None).model == "other-model"
    assert providers.EPOCH.key in read


def broken_redis(*args: Any, **kwargs: Any) -> Any:
    import redis

    raise redis.ConnectionError("Redis is away")
