# ruff: noqa: F811  (pytest fixtures imported from test_budgets are parameters here)
"""A map's LLM items pass the same gates as a node's call: spend budgets and provider health.

Real workers (on slots, and without) and scheduler, a fake provider that counts every request.
Items are never held one by one: where a node's call would be held, the item fails, naming
why, and its map's failure policy decides.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from tests.fakes.llm_server import FakeLLMServer
from tests.integration.conftest import node, publish, wait_finished
from tests.integration.runtime import Runtime
from tests.integration.test_budgets import (
    USED,
    budget_runtime,  # noqa: F401  (a fixture: the workers with slots)
    llm,  # noqa: F401  (a fixture: the fake provider)
    one_at_a_time,  # noqa: F401  (a fixture: the workers without slots)
    tokens_budget,
)
from workflows.core import budgets as core
from workflows.providers_health import breaker
from workflows.runs import actions as runs
from workflows.store.models import BudgetHold, BudgetLedger, DeadLetter, LLMCall, LLMProvider, NodeRun, Wait

MAX_TOKENS = 20
FAILURES = 3  # the provider's breaker opens after this many faults in a row
DOCUMENTS = ["doc 0", "doc 1", "doc 2"]


def summarise_each(provider: str | None = None) -> dict[str, Any]:
    config = {"prompt": "Summarise {item}.", "max_tokens": MAX_TOKENS}
    if provider:
        config["provider"] = provider
    each = node(
        "each", "llm.chat", config=config, map="input.documents", max_parallel=1, retry={"max_attempts": 1}
    )
    return {"nodes": [each], "edges": []}


def worst_case() -> int:
    """What one item's call reserves: its prompt's bound plus max_tokens."""
    return core.prompt_bound([{"role": "user", "content": "Summarise doc 0."}], None) + MAX_TOKENS


def test_items_spend_from_the_budget_and_those_it_has_no_room_for_fail_naming_it(
    budget_runtime: Runtime, llm: FakeLLMServer
) -> None:
    workflow = publish("map-budget", summarise_each())
    # Room for one call's worst case, not for a second one after the first spent USED tokens.
    tokens_budget("map tokens", worst_case() + USED // 2, workflow)
    run, _ = runs.start_run(workflow, {"documents": DOCUMENTS})

    assert wait_finished(run, 60).status == "failed"
    each = NodeRun.objects.get(run=run, node_id="each")
    assert "2 of 3 items failed" in each.error
    assert len(llm.requests) == 1, "no call beyond the budget reached the provider"
    letters = DeadLetter.objects.filter(run=run)
    assert letters.count() == 2
    assert all("budget 'map tokens'" in letter.error and "not held" in letter.error for letter in letters)
    ledger = BudgetLedger.objects.get(budget__name="map tokens")
    assert (ledger.spent, ledger.reserved) == (Decimal(USED), 0)
    [call] = LLMCall.objects.filter(node_run=each)  # recorded under the map node, its item named
    assert call.step.startswith("item ") and (call.input_tokens, call.output_tokens) == (10, 3)
    assert not BudgetHold.objects.exists() and not Wait.objects.exists(), "items are failed, never held"


def test_items_calls_count_against_the_breaker_and_once_it_opens_the_rest_fail_without_a_call(
    one_at_a_time: Runtime, llm: FakeLLMServer
) -> None:
    LLMProvider.objects.create(
        name="primary",
        base_url=llm.base_url,
        default_model="fake-model",
        breaker_failures=FAILURES,
        breaker_open_seconds=300,
    )
    workflow = publish("map-breaker", summarise_each("primary"))
    llm.outage(600, 503)
    run, _ = runs.start_run(workflow, {"documents": [f"doc {i}" for i in range(FAILURES + 2)]})

    assert wait_finished(run, 60).status == "failed"
    assert (
        f"{FAILURES + 2} of {FAILURES + 2} items failed" in NodeRun.objects.get(run=run, node_id="each").error
    )
    assert len(llm.requests) == FAILURES, "the items' faults opened the breaker; no call went after"
    assert breaker.read("primary", "fake-model").state == breaker.OPEN
    errors = sorted(DeadLetter.objects.filter(run=run).values_list("error", flat=True))
    assert sum("primary/fake-model unavailable until" in e for e in errors) == 2
    failed = LLMCall.objects.filter(run=run).exclude(error="")  # the calls made, each recorded failed
    assert failed.count() == FAILURES and all(c.step.startswith("item ") for c in failed)
    assert not Wait.objects.exists(), "items are failed, never held"
