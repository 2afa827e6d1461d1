"""Spend budgets, the pure part: what a budget may say, its windows, and a call's worst case.

A budget caps what LLM calls may spend, in tokens or in cost (the price table's currency),
over a window (each run, each UTC day, each UTC month), for a scope: every call (global),
a workflow's, the runs an API key started, a tenant's (a value of the run's input, say `customer_id`: each value has a
budget of its own, or only the value the budget names). When a call would go over, the
budget's policy decides: `wait` (the node is held until the window resets or the budget is
raised), `ask` (held until a person allows the overspend once, or cancels the run), `fail`
(the attempt fails naming the budget).

A window is a period key (`run:42`, `2026-11-27`, `2026-11`): a ledger row per budget,
period and subject holds what was spent and what is reserved there, so a new day is a new
row and nothing needs resetting. Standard library only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from workflows.core.definition import Issue

TOKENS, COST = "tokens", "cost"
UNITS = (TOKENS, COST)
RUN, DAY, MONTH = "run", "day", "month"
WINDOWS = (RUN, DAY, MONTH)
GLOBAL, WORKFLOW, API_KEY, TENANT = "global", "workflow", "api_key", "tenant"
SCOPES = (GLOBAL, WORKFLOW, API_KEY, TENANT)
WAIT, ASK, FAIL = "wait", "ask", "fail"
POLICIES = (WAIT, ASK, FAIL)

# A held call's reason: over a budget, or under a cost budget with no price for its model.
OVER, NO_PRICE = "budget", "price"

MAX_AMOUNT = Decimal("1e12")  # beyond any real budget: a typo, refused naming the field
MILLION = Decimal(1_000_000)
TENANT_KEY_CHARS = 100


def check_budget(data: dict[str, Any]) -> list[Issue]:
    """Return the problems of a budget's fields (name, unit, amount, window, scope, policy,
    workflow, api_key, tenant_key), each naming its field (`path`); an empty list means it can
    be saved. That the workflow or the key exists is checked where they are (the domain)."""
    problems: list[Issue] = []
    name = data.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 100:
        problems.append(Issue("name", "name must be 1 to 100 characters."))
    for field, allowed in (("unit", UNITS), ("window", WINDOWS), ("scope", SCOPES), ("policy", POLICIES)):
        if data.get(field) not in allowed:
            problems.append(Issue(field, f"{field} must be one of {', '.join(allowed)}."))
    amount = parse_amount(data.get("amount"))
    if amount is None:
        problems.append(Issue("amount", f"amount must be a number from 0 to {MAX_AMOUNT:,.0f}."))
    elif data.get("unit") == TOKENS and amount != amount.to_integral_value():
        problems.append(Issue("amount", "amount must be a whole number of tokens."))
    key = data.get("tenant_key") or ""
    if data.get("scope") == TENANT and not is_input_path(key):
        problems.append(
            Issue("tenant_key", "tenant_key must name a field of the run input, such as customer_id.")
        )
    if data.get("scope") != TENANT and (key or data.get("tenant_value")):
        problems.append(Issue("tenant_key", "tenant_key and tenant_value apply only to the tenant scope."))
    if data.get("scope") == WORKFLOW and not data.get("workflow"):
        problems.append(Issue("workflow", "a workflow budget must name its workflow."))
    if data.get("scope") != WORKFLOW and data.get("workflow"):
        problems.append(Issue("workflow", "only a workflow budget names a workflow."))
    if data.get("scope") == API_KEY and not data.get("api_key"):
        problems.append(Issue("api_key", "an api_key budget must name its key (its prefix)."))
    if data.get("scope") != API_KEY and data.get("api_key"):
        problems.append(Issue("api_key", "only an api_key budget names a key."))
    return problems


def parse_amount(value: Any) -> Decimal | None:
    """A budget's amount as a Decimal, or None when it is not a number in range."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str, Decimal)):
        return None
    try:
        amount = Decimal(str(value).strip())
    except InvalidOperation:
        return None
    if not amount.is_finite() or amount < 0 or amount > MAX_AMOUNT:
        return None
    return amount


def is_input_path(key: str) -> bool:
    """A dotted path of identifiers into the run input (`customer_id`, `account.id`)."""
    if not key or len(key) > TENANT_KEY_CHARS:
        return False
    return all(part.isidentifier() for part in key.split("."))


def tenant_of(run_input: Any, key: str) -> str | None:
    """The tenant value at `key` in the run input, as text; None when it is absent or not a
    scalar (the budget then does not apply to that run)."""
    value = run_input
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    text = str(value)
    return text[:200] if text else None


def period_of(window: str, run_id: int, now: datetime) -> str:
    """The ledger period a call made at `now` in run `run_id` counts against (UTC)."""
    if window == RUN:
        return f"run:{run_id}"
    now = now.astimezone(UTC)
    return now.strftime("%Y-%m-%d") if window == DAY else now.strftime("%Y-%m")


def starts_at(window: str, now: datetime) -> datetime | None:
    """When the window that holds `now` began (None: a run's window)."""
    now = now.astimezone(UTC)
    if window == DAY:
        return datetime(now.year, now.month, now.day, tzinfo=UTC)
    if window == MONTH:
        return datetime(now.year, now.month, 1, tzinfo=UTC)
    return None


def resets_at(window: str, now: datetime) -> datetime | None:
    """When the window that holds `now` ends (None: a run's window never resets)."""
    now = now.astimezone(UTC)
    if window == DAY:
        return datetime(now.year, now.month, now.day, tzinfo=UTC) + timedelta(days=1)
    if window == MONTH:
        return datetime(now.year + now.month // 12, now.month % 12 + 1, 1, tzinfo=UTC)
    return None


def prompt_bound(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int:
    """An upper bound of a request's prompt tokens: the UTF-8 bytes of its messages and tools.

    No tokenizer of a byte-level BPE model makes more tokens than bytes, and the JSON
    punctuation counted here more than covers the few special tokens per message. Reading
    ~4 bytes a token in English, it reserves about four times the real prompt: the cost of
    never going over without a tokenizer per model.
    """
    return len(json.dumps([messages, tools or []], ensure_ascii=False, separators=(",", ":")).encode())


@dataclass(frozen=True)
class Price:
    """Per million input and output tokens."""

    input_per_million: Decimal
    output_per_million: Decimal

    def cost(self, input_tokens: int, output_tokens: int) -> Decimal:
        return (input_tokens * self.input_per_million + output_tokens * self.output_per_million) / MILLION


def amount_of(unit: str, input_tokens: int, output_tokens: int, price: Price | None) -> Decimal | None:
    """What a call of these token counts weighs against a budget of `unit`; None: a cost
    budget and no price (the call is held, never counted free)."""
    if unit == TOKENS:
        return Decimal(input_tokens + output_tokens)
    return None if price is None else price.cost(input_tokens, output_tokens)
