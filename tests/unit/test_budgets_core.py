"""The pure part of spend budgets: fields, windows, tenants and a call's worst case."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from workflows.core import budgets as core

GOOD = {
    "name": "daily",
    "unit": "cost",
    "amount": "2.5",
    "window": "day",
    "scope": "global",
    "policy": "wait",
}


def paths(data: dict[str, Any]) -> list[str]:
    return [issue.path for issue in core.check_budget(data)]


def test_a_good_budget_has_no_problem() -> None:
    assert paths(GOOD) == []
    assert paths({**GOOD, "scope": "tenant", "tenant_key": "account.id", "tenant_value": "acme"}) == []
    assert paths({**GOOD, "scope": "workflow", "workflow": "orders"}) == []


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"amount": -0.01}, ["amount"]),
        ({"amount": "NaN"}, ["amount"]),
        ({"amount": "Infinity"}, ["amount"]),
        ({"amount": True}, ["amount"]),
        ({"amount": None}, ["amount"]),
        ({"amount": 10**13}, ["amount"]),
        ({"unit": "tokens", "amount": "10.5"}, ["amount"]),
        ({"unit": "dollars"}, ["unit"]),
        ({"scope": "planet"}, ["scope"]),
        ({"scope": "api_key"}, ["api_key"]),
        ({"api_key": "ab12cd34"}, ["api_key"]),
        ({"window": "hour"}, ["window"]),
        ({"policy": "ignore"}, ["policy"]),
        ({"scope": "tenant", "tenant_key": ""}, ["tenant_key"]),
        ({"scope": "tenant", "tenant_key": "1st"}, ["tenant_key"]),
        ({"tenant_key": "customer_id"}, ["tenant_key"]),
        ({"workflow": "orders"}, ["workflow"]),
        ({"name": "x" * 101}, ["name"]),
    ],
)
def test_bad_fields_are_named(change: dict[str, Any], expected: list[str]) -> None:
    assert paths({**GOOD, **change}) == expected


def test_windows_are_utc_days_and_months_or_the_run() -> None:
    late = datetime(2026, 12, 31, 23, 59, tzinfo=UTC)
    assert core.period_of(core.DAY, 7, late) == "2026-12-31"
    assert core.period_of(core.MONTH, 7, late) == "2026-12"
    assert core.period_of(core.RUN, 7, late) == "run:7"
    assert core.resets_at(core.DAY, late) == datetime(2027, 1, 1, tzinfo=UTC)
    assert core.resets_at(core.MONTH, late) == datetime(2027, 1, 1, tzinfo=UTC)
    assert core.resets_at(core.MONTH, datetime(2026, 2, 10, tzinfo=UTC)) == datetime(2026, 3, 1, tzinfo=UTC)
    assert core.resets_at(core.RUN, late) is None


@pytest.mark.parametrize(
    ("run_input", "key", "expected"),
    [
        ({"customer_id": "acme"}, "customer_id", "acme"),
        ({"customer_id": 42}, "customer_id", "42"),
        ({"account": {"id": "a-1"}}, "account.id", "a-1"),
        ({"customer_id": ""}, "customer_id", None),
        ({"customer_id": None}, "customer_id", None),
        ({"customer_id": {"nested": 1}}, "customer_id", None),
        ({"customer_id": True}, "customer_id", None),
        ({}, "customer_id", None),
        ("not an object", "customer_id", None),
    ],
)
def test_the_tenant_is_a_scalar_of_the_run_input(run_input: Any, key: str, expected: str | None) -> None:
    assert core.tenant_of(run_input, key) == expected


def test_the_prompt_bound_counts_every_byte_of_messages_and_tools() -> None:
    messages = [{"role": "user", "content": "héllo"}]
    alone = core.prompt_bound(messages, None)
    assert alone >= len("héllo".encode()) + len("user")
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]
    assert core.prompt_bound(messages, tools) > alone


def test_a_cost_budget_without_a_price_weighs_nothing_known() -> None:
    price = core.Price(Decimal("2"), Decimal("8"))
    assert core.amount_of(core.TOKENS, 100, 20, None) == 120
    assert core.amount_of(core.COST, 1_000_000, 500_000, price) == Decimal("6")
    assert core.amount_of(core.COST, 100, 20, None) is None
