"""The providers' admission gate: an open breaker or a full rate holds the call, never fails it.

Registered with the runtime's call gate at app start (workflows/apps.py), after the budgets'.
Before each LLM call it asks the breaker of the call's provider and model (one Redis script)
and, when the provider has rate limits, its request and token logs (one more). A call that
may not go is held (holds.py: the node waits, no attempt spent), or, when the node has a
fallback after this provider/model (`Call.may_skip`), refused as Unavailable so the node tries
the next. After the call, its outcome is counted by the breaker (only the provider's faults
count against it); the call that closes a breaker releases the attempts held behind it at
once. A call that failed for good asks `recheck`: when every breaker of its route is now
open, or when its own breaker decided something since the call went (breaker.STALE: a failure
met during an outage the breaker saw, reported after it opened, and maybe closed again), its
attempt is held instead of spending itself on an outage; a breaker closed again releases it at
the duty's next round. A map item's call (`Call.may_hold` False) is never held: where the
node's call would be held, the item fails (retryable, as a provider's 5xx would), so its
map's retry policy and failure policy decide; it counts against the breaker like any call.

A probe (the one call of a half-open breaker) that the rate limit then refuses gives its
lease back at once; one never made for another reason (a replayed call, a cancelled one)
keeps it until it runs out (the provider's timeout plus breaker.PROBE_GRACE_SECONDS); then
the next call, or the attempt the duty releases for it, probes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from workflows.core import budgets as core_budgets
from workflows.handlers.registry import HandlerError
from workflows.runtime.admission import Call, Fault, Unavailable
from workflows.runtime.kinds import Parked

from . import breaker, holds, rates
from .policy import policy_of


@dataclass(frozen=True)
class Ticket:
    provider: str
    model: str
    verdict: breaker.Verdict
    taken: rates.Taken | None
    call: tuple[int, int, str, str]  # (node run, attempt, provider, model): what recheck asks about


STALE_KEPT = 10_000  # the bound on `ProviderGate.stale` (a failure that never asks recheck stays)


class ProviderGate:
    def __init__(self) -> None:
        # The attempts whose last call failed stale (see the module), until their recheck:
        # settle and recheck run one after the other for the same call in this process.
        self.stale: set[tuple[int, int, str, str]] = set()

    def reserve(self, call: Call) -> tuple[Any, int | None] | None:
        policy = policy_of(call.provider)
        verdict = breaker.check(call.provider, call.model, policy)
        if not verdict.go:
            self.refuse(call, holds.BREAKER, verdict.until)
        taken = None
        if policy.has_rates:
            bound = call.max_tokens or int(settings.SWITCHYARD["BUDGET_OUTPUT_TOKENS"])
            found = rates.take(policy, core_budgets.prompt_bound(call.messages, call.tools) + bound)
            if isinstance(found, datetime):
                if verdict.probe:
                    breaker.give_back_probe(call.provider, call.model)
                self.refuse(call, holds.RATE, found)
            else:
                taken = found
        return Ticket(call.provider, call.model, verdict, taken, called(call)), None

    def refuse(self, call: Call, why: str, until: datetime | None) -> None:
        """Say Unavailable (a fallback follows) or hold the attempt; never return."""
        if call.may_skip:
            raise Unavailable(f"provider {call.provider}/{call.model} unavailable until {holds.stamp(until)}")
        if not call.may_hold:  # a map's item: failed as a provider's refusal would be, and retried so
            raise HandlerError(
                f"llm node {call.node_id!r} of run {call.run_id}: provider {call.provider}/{call.model} "
                f"unavailable until {holds.stamp(until)} (a map item's call is not held)."
            )
        holds.hold(call, why, until, timezone.now())
        raise Parked(
            f"llm node {call.node_id!r} of run {call.run_id} is held: provider "
            f"{call.provider}/{call.model} unavailable until {holds.stamp(until)}."
        )

    def settle(
        self,
        ticket: Any,
        input_tokens: int | None,
        output_tokens: int | None,
        ok: bool,
        fault: Fault | None = None,
    ) -> None:
        if ticket.taken is not None and ok and input_tokens is not None:
            rates.settle(ticket.taken, input_tokens + (output_tokens or 0))
        if not ok and fault is None:
            return  # not made (replayed, cancelled) or refused as a bad request: no news of the provider
        policy = policy_of(ticket.provider)
        decision = breaker.report(ticket.provider, ticket.model, policy, ok, ticket.verdict, fault)
        if decision == breaker.STALE and not ok:
            if len(self.stale) >= STALE_KEPT:
                self.stale.clear()
            self.stale.add(ticket.call)
        if decision == breaker.CLOSED_AGAIN:
            holds.offer_held()  # the closing call wakes the held at once, not at the duty's next round

    def recheck(self, call: Call) -> None:
        """Hold a call that failed for good when no provider/model of its route may go now
        (a map item's call is never held: its failure stands)."""
        stale = called(call) in self.stale
        self.stale.discard(called(call))
        if not call.may_hold:
            return
        states = [breaker.read(provider, model) for provider, model in holds.route_of(call)]
        if stale or all(s.state != breaker.CLOSED for s in states):
            until = min((s.until for s in states if s.until is not None), default=None)
            holds.hold(call, holds.BREAKER, until, timezone.now())
            raise Parked(
                f"llm node {call.node_id!r} of run {call.run_id} is held: its providers are unavailable."
            )


def called(call: Call) -> tuple[int, int, str, str]:
    return (call.node_run_id, call.attempt, call.provider, call.model)
