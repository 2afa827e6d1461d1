"""Spend budgets end to end: real workers and scheduler, agent runs against a fake provider
that counts every call it is asked, budgets reserved in PostgreSQL before each call."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from tests.fakes.llm_server import FakeLLMServer
from tests.integration import agent_tools  # noqa: F401  (registers the test tools here too)
from tests.integration.conftest import publish, two_workers_and_a_scheduler, wait_finished
from tests.integration.runtime import Runtime, wait_for
from tests.integration.test_agent import MODULES as TOOL_MODULES, completion, scripted
from workflows.agents.loop import offer_tools
from workflows.budgets import alerts, holds, ledger, manage
from workflows.budgets.gate import BudgetGate
from workflows.core import budgets as core
from workflows.core.states import NodeStatus as N
from workflows.llm import catalog
from workflows.runs import actions as runs
from workflows.runtime import bus
from workflows.runtime.admission import Call
from workflows.runtime.kinds import Parked
from workflows.store.models import (
    AgentStep,
    Budget,
    BudgetHold,
    BudgetLedger,
    LLMCall,
    NodeRun,
    Run,
    RunEvent,
    Wait,
    Workflow,
)

PROMPT = "Do the task for {input.who}."
MAX_TOKENS = 20
USED = 13  # the fake's answer: 10 prompt tokens and 3 completion tokens


def answer(request: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-budget",
        "model": "fake-model",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
    }


def worst_case(who: str) -> int:
    """What one agent turn of these runs reserves: its prompt's bound plus max_tokens."""
    messages = [{"role": "user", "content": PROMPT.replace("{input.who}", who)}]
    return core.prompt_bound(messages, None) + MAX_TOKENS


def agent_flow() -> dict[str, Any]:
    config = {"prompt": PROMPT, "tools": [], "max_tokens": MAX_TOKENS}
    return {"nodes": [{"id": "agent", "handler": "llm.agent", "config": config}], "edges": []}


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        fake.reply = answer
        yield fake


@pytest.fixture
def budget_runtime(transactional_db: Any, redis_clean: None, llm: FakeLLMServer) -> Iterator[Runtime]:
    yield from two_workers_and_a_scheduler(LLM_BASE_URL=llm.base_url, LLM_MODEL="fake-model")


@pytest.fixture
def one_at_a_time(transactional_db: Any, redis_clean: None, llm: FakeLLMServer) -> Iterator[Runtime]:
    """Two workers without slots: each makes its calls on its main thread, one at a time."""
    yield from two_workers_and_a_scheduler(
        LLM_BASE_URL=llm.base_url, LLM_MODEL="fake-model", SWITCHYARD_WORKER_SLOTS="0"
    )


def tokens_budget(name: str, amount: int, workflow: Workflow | None = None) -> Any:
    scope = {"scope": "workflow", "workflow": workflow.slug} if workflow else {"scope": "global"}
    return manage.save_budget(
        {"name": name, "unit": "tokens", "amount": amount, "window": "day", "policy": "wait", **scope}
    )


def statuses(workflow: Workflow) -> dict[str, int]:
    found: dict[str, int] = {}
    for status in NodeRun.objects.filter(run__workflow=workflow).values_list("status", flat=True):
        found[status] = found.get(status, 0) + 1
    return found


def open_holds() -> int:
    return BudgetHold.objects.filter(closed_at__isnull=True).count()


def test_runs_stop_at_the_budget_with_no_call_beyond_it_then_resume_when_it_is_raised(
    budget_runtime: Runtime, llm: FakeLLMServer
) -> None:
    runs_count, covered = 200, 50
    workflow = publish("budgeted", agent_flow())
    # A call goes when its worst case fits what is left: after k settled calls, k * USED + W
    # <= amount. So this amount lets exactly `covered` calls through, whatever their order.
    amount = (covered - 1) * USED + worst_case("ana")
    budget = tokens_budget("daily tokens", amount, workflow)
    started = [run for run, _ in runs.start_runs(workflow, [runs.StartItem({"who": "ana"})] * runs_count)]

    wait_for(
        lambda: statuses(workflow) == {"succeeded": covered, "waiting": runs_count - covered}
        and open_holds() == runs_count - covered,
        90,
        "the budget's runs to finish and the rest to be held",
    )
    assert len(llm.requests) == covered  # the provider was asked for no call beyond the budget
    row = BudgetLedger.objects.get(budget=budget)
    assert (row.spent, row.reserved, row.calls) == (covered * USED, 0, covered)
    assert row.spent <= budget.amount
    held = NodeRun.objects.filter(run__workflow=workflow, status=N.WAITING)
    assert set(held.values_list("attempt", flat=True)) == {1}  # held, no attempt spent
    assert Wait.objects.filter(kind="budget", closed_at__isnull=True).count() == runs_count - covered
    assert LLMCall.objects.filter(workflow=workflow).count() == covered
    # Alerted once each, on runs of the workflow: 80 % spent, then the first call refused.
    threshold = RunEvent.objects.get(kind="budget.threshold", run__workflow=workflow)
    exhausted = RunEvent.objects.get(kind="budget.exhausted", run__workflow=workflow)
    assert threshold.data["budget"]["name"] == exhausted.data["budget"]["name"] == "daily tokens"
    assert Decimal(threshold.data["budget"]["spent"]) >= Decimal("0.8") * budget.amount
    assert threshold.data["budget"]["percent"] >= 80 and threshold.node_id == "agent"

    manage.save_budget({**manage.as_dict(budget), "workflow": workflow.slug, "amount": 10_000}, budget.pk)
    for run in started:
        assert wait_finished(run, 90).status == "succeeded"
    assert len(llm.requests) == runs_count
    assert open_holds() == 0
    row.refresh_from_db()
    assert (row.spent, row.reserved) == (runs_count * USED, 0)
    # 2,600 of the raised 10,000 is under 80 %: no second alert.
    assert RunEvent.objects.filter(kind__startswith="budget.", run__workflow=workflow).count() == 2


def running_call(workflow: Workflow) -> Call:
    """A call of a new run's agent node, its attempt running as a worker's claim leaves it."""
    run, _ = runs.start_run(workflow, {"who": "ana"})
    node = NodeRun.objects.get(run=run)
    NodeRun.objects.filter(pk=node.pk).update(status=N.RUNNING, attempt=1)
    messages = [{"role": "user", "content": PROMPT.replace("{input.who}", "ana")}]
    return Call(node.pk, run.pk, "agent", 1, "", "fake-model", messages, None, MAX_TOKENS)


def exhausted_alerts() -> int:
    return RunEvent.objects.filter(kind="budget.exhausted").count()


def test_one_exhausted_alert_per_episode_and_none_for_a_refusal_the_raise_already_answered(
    transactional_db: Any,
) -> None:
    """A held call asking again while the budget is raised can wait for the row lock the
    raise's rearm holds, then be refused at the amount its statement began with, and its
    alert is written after the raise committed: the episode it belongs to was alerted and
    ended. Only a refusal at the amount as it is now is a (new) exhaustion."""
    workflow = publish("episodes", agent_flow())
    budget = tokens_budget("raised mid-call", worst_case("ana") + USED - 1, workflow)
    gate = BudgetGate()
    first, _ = gate.reserve(running_call(workflow))  # type: ignore[misc]
    gate.settle(first, 10, 3, ok=True)
    for _ in range(2):
        with pytest.raises(Parked):
            gate.reserve(running_call(workflow))
    assert exhausted_alerts() == 1  # the episode's first refusal only

    late = running_call(workflow)
    refused_at = ledger.worst_cases(late, MAX_TOKENS, timezone.now())[0]  # decided at the old amount
    manage.save_budget({**manage.as_dict(budget), "workflow": workflow.slug, "amount": 1_000}, budget.pk)
    assert BudgetLedger.objects.get(budget=budget).exhausted_at is None  # rearmed: a new episode
    assert not alerts.refused(
        late, budget, refused_at.period, refused_at.subject, Decimal(refused_at.worst or 0)
    )
    assert exhausted_alerts() == 1

    after = running_call(workflow)
    BudgetLedger.objects.filter(budget=budget).update(spent=Decimal(1_000))  # the new amount spent
    with pytest.raises(Parked):
        gate.reserve(after)
    assert exhausted_alerts() == 2  # the new episode alerts once
    assert BudgetLedger.objects.get(budget=budget).exhausted_at is not None


def test_a_round_after_a_raise_does_not_give_away_again_the_room_an_earlier_round_released(
    transactional_db: Any, redis_clean: None
) -> None:
    """The attempts a round released reserve only when a worker runs them (seconds later on a
    loaded machine): until then the next rounds count their needs as taken."""
    workflow = publish("rounds", agent_flow())
    budget = tokens_budget("two after the raise", worst_case("ana") - 1, workflow)  # no call fits
    gate = BudgetGate()
    calls = [running_call(workflow) for _ in range(3)]
    for call in calls:
        with pytest.raises(Parked):
            gate.reserve(call)
    manage.save_budget(
        {**manage.as_dict(budget), "workflow": workflow.slug, "amount": 2 * worst_case("ana")}, budget.pk
    )

    assert holds.offer_held() == 2
    assert holds.offer_held() == 0  # the two released have not reserved yet: no room for the third
    assert open_holds() == 1


def test_two_workers_racing_for_the_last_of_a_budget_never_overspend(
    one_at_a_time: Runtime, llm: FakeLLMServer
) -> None:
    workflow = publish("raced", agent_flow())
    budget = tokens_budget("room for one", worst_case("ana"))  # one call's worst case: one call
    runs.start_runs(workflow, [runs.StartItem({"who": "ana"}) for _ in range(12)])

    wait_for(
        lambda: statuses(workflow) == {"succeeded": 1, "waiting": 11} and open_holds() == 11,
        90,
        "one run to finish and the others to be held",
    )
    assert len(llm.requests) == 1
    row = BudgetLedger.objects.get(budget=budget)
    assert (row.spent, row.reserved) == (USED, 0)
    assert Run.objects.filter(workflow=workflow, status="running").count() == 11


def test_a_run_is_refused_at_start_when_its_workflows_budget_is_spent(transactional_db: Any) -> None:
    workflow = publish("spent", agent_flow())
    budget = tokens_budget("spent budget", 100, workflow)
    BudgetLedger.objects.create(
        budget=budget, period=core.period_of("day", 0, budget.created_at), subject="", spent=Decimal(100)
    )

    with pytest.raises(runs.Conflict, match="Budget 'spent budget'"):
        runs.start_run(workflow, {"who": "ana"})
    assert not Run.objects.filter(workflow=workflow).exists()


def test_a_budget_created_in_another_process_counts_from_the_next_run_start(transactional_db: Any) -> None:
    """Starts read the budgets where the calls' gate does (ledger.ALL_BUDGETS): another
    process's save replaces the budgets' epoch, and the next start here reads them again.
    "Another process" is played as tests/integration/test_agent_statements.py plays it."""
    workflow = publish("made-elsewhere", agent_flow())
    runs.start_run(workflow, {"who": "ana"})  # no budget yet: remembered so
    Budget.objects.bulk_create(  # no signal reaches this process
        [
            Budget(
                name="elsewhere",
                unit="tokens",
                amount=Decimal(100),
                window="day",
                scope="workflow",
                workflow=workflow,
            )
        ]
    )
    budget = Budget.objects.get(name="elsewhere")
    BudgetLedger.objects.bulk_create(
        [
            BudgetLedger(
                budget=budget, period=core.period_of("day", 0, timezone.now()), subject="", spent=Decimal(100)
            )
        ]
    )
    ledger.EPOCH.replace()  # what the creating process's signal does

    with pytest.raises(runs.Conflict, match="Budget 'elsewhere'"):
        runs.start_run(workflow, {"who": "ana"})


def test_a_cost_budget_holds_calls_to_a_model_without_a_price_until_one_is_set(
    budget_runtime: Runtime, llm: FakeLLMServer
) -> None:
    workflow = publish("unpriced", agent_flow())
    budget = manage.save_budget(
        {"name": "dollars", "unit": "cost", "amount": "1", "window": "month", "scope": "global"}
    )
    run, _ = runs.start_run(workflow, {"who": "ana"})

    hold = wait_for(lambda: BudgetHold.objects.filter(closed_at__isnull=True).first(), 60, "the hold")
    assert (hold.reason, hold.model, hold.need) == ("price", "fake-model", None)
    assert len(llm.requests) == 0  # never treated as free
    with pytest.raises(runs.Conflict, match="waits for a price"):
        holds.allow_once(hold.pk)  # not even once

    catalog.save_price("fake-model", "1000", "2000")  # per million: 10 in + 3 out = 0.016
    assert wait_finished(run, 60).status == "succeeded"
    assert len(llm.requests) == 1
    row = BudgetLedger.objects.get(budget=budget)
    assert (row.spent, row.reserved) == (Decimal("0.016"), 0)
    assert LLMCall.objects.get(run=run).cost == row.spent


def test_a_budget_whose_policy_is_fail_fails_the_attempt_naming_it_without_a_call(
    budget_runtime: Runtime, llm: FakeLLMServer
) -> None:
    flow = agent_flow()
    flow["nodes"][0]["retry"] = {"max_attempts": 3, "backoff_seconds": 0.1}
    workflow = publish("strict", flow)
    tokens_budget("tight", 5, workflow)
    Budget.objects.filter(name="tight").update(policy="fail")
    run, _ = runs.start_run(workflow, {"who": "ana"})

    assert wait_finished(run, 60).status == "failed"
    node = NodeRun.objects.get(run=run)
    assert node.status == "dead" and "budget 'tight'" in node.error and "policy is fail" in node.error
    assert (node.attempt, node.retryable) == (1, False), "dead at once: a retry would be refused the same way"
    assert len(llm.requests) == 0
    assert open_holds() == 0


def test_held_runs_survive_a_redis_flush_and_a_cancel_closes_a_hold(
    budget_runtime: Runtime, llm: FakeLLMServer
) -> None:
    workflow = publish("flushed", agent_flow())
    budget = tokens_budget("too small", 5, workflow)  # left, but less than a call's worst case
    first, _ = runs.start_run(workflow, {"who": "ana"})
    second, _ = runs.start_run(workflow, {"who": "ana"})
    wait_for(lambda: open_holds() == 2, 60, "both runs held")

    bus.client().flushdb()  # Redis restarted empty: the holds are all in PostgreSQL
    bus.ensure_group()
    runs.cancel_run(second.pk, "not needed")
    wait_for(lambda: open_holds() == 1, 30, "the cancelled run's hold closed")
    assert BudgetHold.objects.get(run=second).outcome == "gone"

    manage.save_budget({**manage.as_dict(budget), "workflow": workflow.slug, "amount": 1000}, budget.pk)
    assert wait_finished(first, 60).status == "succeeded"
    assert len(llm.requests) == 1


@pytest.fixture
def tools_runtime(transactional_db: Any, redis_clean: None, llm: FakeLLMServer) -> Iterator[Runtime]:
    yield from two_workers_and_a_scheduler(
        LLM_BASE_URL=llm.base_url, LLM_MODEL="fake-model", SWITCHYARD_HANDLER_MODULES=TOOL_MODULES
    )


def test_an_agent_held_between_turns_goes_on_from_its_recorded_steps(
    tools_runtime: Runtime, llm: FakeLLMServer, tmp_path: Path
) -> None:
    llm.reply = scripted(completion(None, ("test__record", {"note": "first"})), completion("All noted."))
    config = {"prompt": PROMPT, "tools": ["test.record"], "max_tokens": MAX_TOKENS}
    workflow = publish(
        "toolful", {"nodes": [{"id": "agent", "handler": "llm.agent", "config": config}], "edges": []}
    )
    opening = [{"role": "user", "content": "Do the task for ana."}]
    first_turn = core.prompt_bound(opening, offer_tools(["test.record"]).specs) + MAX_TOKENS
    budget = tokens_budget("one turn", first_turn, workflow)  # the second turn's worst case is larger
    log = tmp_path / "tools.log"
    run, _ = runs.start_run(workflow, {"who": "ana", "log": str(log)})

    wait_for(lambda: open_holds() == 1, 60, "the second turn held")
    assert len(llm.requests) == 1
    node = NodeRun.objects.get(run=run)
    assert (node.status, node.attempt) == ("waiting", 1)
    assert [(s.kind, s.status) for s in AgentStep.objects.filter(node_run=node).order_by("seq")] == [
        ("turn", "ok"),
        ("tool", "ok"),
    ]

    manage.save_budget({**manage.as_dict(budget), "workflow": workflow.slug, "amount": 10_000}, budget.pk)
    assert wait_finished(run, 60).status == "succeeded"
    assert len(llm.requests) == 2  # the first turn was not asked again
    assert len(log.read_text().splitlines()) == 1  # nor the tool called again
    node.refresh_from_db()
    assert node.attempt == 1 and node.output["turns"] == 2


def test_when_a_raise_covers_one_held_call_the_highest_priority_run_goes_first(
    budget_runtime: Runtime, llm: FakeLLMServer
) -> None:
    workflow = publish("ranked", agent_flow())
    budget = tokens_budget("ranked", 5, workflow)  # left, but less than any call's worst case
    low, _ = runs.start_run(workflow, {"who": "ana"}, priority=-5)
    high, _ = runs.start_run(workflow, {"who": "ana"}, priority=5)
    middle, _ = runs.start_run(workflow, {"who": "ana"}, priority=0)
    wait_for(lambda: open_holds() == 3, 60, "all three held")

    amount = worst_case("ana") + 5  # room for one call's worst case, not two
    manage.save_budget({**manage.as_dict(budget), "workflow": workflow.slug, "amount": amount}, budget.pk)
    assert wait_finished(high, 60).status == "succeeded"
    wait_for(lambda: open_holds() == 2, 30, "the other two still held")
    assert len(llm.requests) == 1
    assert {Run.objects.get(pk=r.pk).status for r in (low, middle)} == {"running"}


def test_lost_reservations_of_one_ledger_are_all_settled_together(transactional_db: Any) -> None:
    """A killed worker leaves several reservations on one window: each one is settled at its
    worst case, none counted twice or dropped (one UPDATE per ledger, summed)."""
    workflow = publish("lost-ones", agent_flow())
    budget = tokens_budget("shared window", 1_000, workflow)
    made = [runs.start_run(workflow, {"who": "ana"})[0] for _ in range(3)]
    nodes = [NodeRun.objects.get(run=run) for run in made]
    for node in nodes:
        call = Call(
            node.pk, node.run_id, "agent", 1, "", "fake-model", [{"role": "user", "content": "x"}], None, 10
        )
        ledger.reserve(call, ledger.worst_cases(call, 10, timezone.now()))
    NodeRun.objects.filter(pk__in=[n.pk for n in nodes]).update(status=N.FAILED)  # their worker is gone
    row = BudgetLedger.objects.get(budget=budget)
    worst = row.reserved / 3

    assert ledger.settle_lost(timezone.now() + timedelta(minutes=5)) == 3
    row.refresh_from_db()
    assert (row.reserved, row.spent, row.calls) == (0, 3 * worst, 3)
    assert RunEvent.objects.filter(kind="budget.threshold").count() == 0  # 3 small calls: far from 80 %
