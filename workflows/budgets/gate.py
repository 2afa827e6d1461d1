"""The budgets' admission gate: reserve before an LLM call, hold or fail when it does not fit.

Registered with the runtime's call gate at app start (workflows/apps.py). A call under no
budget costs one query (the budgets, none) and passes. A call that does not fit is held
(policies `wait` and `ask`, and always when a cost budget has no price for the model: never
counted free), or fails naming the budget (policy `fail`). A node that sets no `max_tokens`
is reserved, and sent, with SWITCHYARD_BUDGET_OUTPUT_TOKENS as its answer's bound, so that
the worst case reserved is a real bound.

A map's items reserve under their map node's attempt like any call, and are never held: an
item whose call does not fit fails for good naming the budget (its map's failure policy
decides what follows), whatever the budget's policy.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils import timezone

from workflows.core import budgets as core
from workflows.handlers.registry import HandlerError
from workflows.runtime.admission import Call, Fault
from workflows.runtime.kinds import Parked

from . import alerts, holds, ledger


class BudgetGate:
    def reserve(self, call: Call) -> tuple[Any, int | None] | None:
        now = timezone.now()
        bound = call.max_tokens or int(settings.SWITCHYARD["BUDGET_OUTPUT_TOKENS"])
        applies = ledger.worst_cases(call, bound, now)
        if not applies:
            return None
        try:
            return ledger.reserve(call, applies), bound
        except ledger.NoRoom as refused:
            budget = refused.applies.budget
            over = refused.applies
            if refused.reason == core.OVER and over.worst is not None:
                alerts.refused(call, budget, over.period, over.subject, over.worst)
            what = f"llm node {call.node_id!r} of run {call.run_id}"
            if refused.reason == core.OVER and budget.policy == core.FAIL:
                raise HandlerError(
                    f"{what}: budget {budget.name!r} ({budget.amount.normalize():f} {budget.unit} per "
                    f"{budget.window}) has no room for this call's worst case "
                    f"({refused.applies.worst}); its policy is fail. Raise the budget, then replay the node.",
                    retryable=False,  # a retry in the same window would be refused the same way
                ) from None
            reason = "over" if refused.reason == core.OVER else "no price for its model under"
            if not call.may_hold:  # a map's item: failed, not held (its map decides what follows)
                raise HandlerError(
                    f"{what}: a map item's call is {reason} budget {budget.name!r}, and items are not "
                    "held; raise the budget, then replay the node.",
                    retryable=False,
                ) from None
            holds.hold(call, refused, now)
            raise Parked(f"{what} is held: {reason} budget {budget.name!r}.") from None

    def settle(
        self,
        ticket: Any,
        input_tokens: int | None,
        output_tokens: int | None,
        ok: bool,
        fault: Fault | None = None,
    ) -> None:
        ledger.settle(ticket, input_tokens, output_tokens, ok)
