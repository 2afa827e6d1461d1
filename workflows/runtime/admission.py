"""The gate before an LLM call: what must admit a call before it is made and paid for.

capacity.py admits attempts when they are claimed; this module admits the calls an attempt
makes (each `llm.chat` call, each `llm.agent` turn), in the worker, just before the request
leaves: the seam where spend budgets reserve a call's worst case (workflows/budgets) and
provider breakers and request/token rates look (workflows/providers_health). The domain registers its gates at app start
(workflows/apps.py), so the runtime never imports it; with none registered a call passes
for nothing.

A gate either admits the call (returning a ticket it settles after the call, with the
usage the provider reported), or holds the attempt itself (in PostgreSQL, then raising
kinds.Parked: the worker stores nothing and moves on), or fails it (HandlerError naming
why), or, for a call that has a fallback after it (`may_skip`), says the provider is
unavailable (raising Unavailable: the caller tries its next provider/model). A gate's
settle is told the provider's fault when the call failed by one (a timeout, a 5xx, a 429,
a lost connection: `Fault`; a refusal of the request itself is no fault of the provider).
After a call failed for good, `recheck` lets a gate hold the attempt instead of letting it
spend an attempt (a breaker that the failure opened). All these calls are blocking (they talk to PostgreSQL): in a worker's slots they run on
the sync thread (offload.run_sync), never on the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Call:
    """One LLM call about to be made, as the gates see it."""

    node_run_id: int
    run_id: int
    node_id: str
    attempt: int
    provider: str
    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    max_tokens: int | None  # the node's own bound on the answer, if it set one
    # Every provider/model the node may try, in order (this call's among them): a hold
    # waits for any of them. Empty: only this call's.
    route: tuple[tuple[str, str], ...] = ()
    may_skip: bool = False  # a fallback follows: say Unavailable rather than hold
    # False for a map item's call: items are not held one by one, so a gate that would hold
    # the call fails it instead (HandlerError), as a provider's refusal would.
    may_hold: bool = True


@dataclass(frozen=True)
class Fault:
    """Why a call failed by its provider's fault: an HTTP status (429, 408, 5xx) or none (a
    timeout, a lost connection), and the Retry-After it gave, in seconds from now."""

    status: int | None
    retry_after: float | None
    detail: str


class Unavailable(Exception):
    """The call's provider/model may not be called now and the call may skip it."""


@dataclass(frozen=True)
class Admitted:
    """A call let through: the gates' tickets, and the answer's bound the call must carry
    (`max_tokens`, set when a gate counted on a bound the node did not set)."""

    tickets: list[tuple[Gate, Any]] = field(default_factory=list)
    max_tokens: int | None = None

    def options(self, options: dict[str, Any]) -> dict[str, Any]:
        """The call's options with the bound a gate reserved for (the node's own stays)."""
        if self.max_tokens is None or "max_tokens" in options:
            return options
        return {**options, "max_tokens": self.max_tokens}


NOTHING = Admitted()


class Gate(Protocol):
    def reserve(self, call: Call) -> tuple[Any, int | None] | None:
        """Admit `call`: return (a ticket to settle, the max_tokens it counted on) or None
        when the gate has nothing to say about it; hold (raise kinds.Parked) or fail
        (raise HandlerError) otherwise."""
        ...

    def settle(
        self,
        ticket: Any,
        input_tokens: int | None,
        output_tokens: int | None,
        ok: bool,
        fault: Fault | None = None,
    ) -> None:
        """Settle an admitted call with what it used (`ok` False: it failed; `fault`: by
        its provider's fault)."""
        ...


class Recheck(Protocol):
    def recheck(self, call: Call) -> None:
        """Hold the attempt of a call that just failed (raise kinds.Parked) when its provider
        may not be called now; return otherwise."""
        ...


GATES: list[Gate] = []
RECHECKS: list[Recheck] = []


def register(gate: Gate) -> None:
    """Add a gate (at app start)."""
    GATES.append(gate)


def register_recheck(check: Recheck) -> None:
    """Add a recheck (at app start)."""
    RECHECKS.append(check)


def recheck(call: Call) -> None:
    """Before a failed call spends its attempt: let each recheck hold it instead."""
    for check in RECHECKS:
        check.recheck(call)


def admit(call: Call) -> Admitted:
    """Pass the call through every gate; return what to settle. A gate that holds or fails
    the call raises, after the gates before it were settled as unused."""
    tickets: list[tuple[Gate, Any]] = []
    bound = call.max_tokens
    try:
        for gate in GATES:
            found = gate.reserve(call)
            if found is not None:
                ticket, counted = found
                tickets.append((gate, ticket))
                bound = counted if bound is None else bound
    except BaseException:
        settle(Admitted(tickets), None, None, ok=False)
        raise
    return Admitted(tickets, bound if call.max_tokens is None else None) if tickets else NOTHING


def settle(
    admitted: Admitted,
    input_tokens: int | None,
    output_tokens: int | None,
    ok: bool,
    fault: Fault | None = None,
) -> None:
    """Settle every ticket of an admitted call."""
    for gate, ticket in admitted.tickets:
        gate.settle(ticket, input_tokens, output_tokens, ok, fault)
