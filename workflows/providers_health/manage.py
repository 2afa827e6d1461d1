"""Provider health as people read it and act on it: each breaker's state, its recent errors,
the attempts held behind it, the rates' figures; forcing a breaker open or closed (audited).

One place for the providers health page and the API: both call `health` and `force`; bad
input is refused here, naming the field (Invalid, 422), an unknown breaker with NotFound.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.utils import timezone

from workflows.core.definition import Issue
from workflows.llm import providers
from workflows.store import audit
from workflows.store.errors import Invalid, NotFound
from workflows.store.models import BreakerDecision, LLMCall, LLMProvider, Wait

from . import breaker, holds, policy, rates

MAX_FORCE_SECONDS = 7 * 86400
DEFAULT_FORCE_SECONDS = 600
RECENT = 5
LABELS = {
    breaker.OPENED: "opened",
    breaker.HALF_OPENED: "half-opened",
    breaker.CLOSED_AGAIN: "closed",
    breaker.FORCED_OPEN: "forced open",
    breaker.FORCED_CLOSED: "forced closed",
}


@dataclass(frozen=True)
class BreakerView:
    """One breaker as its page and the API show it."""

    state: breaker.State
    held: list[Wait]
    held_count: int
    errors: list[LLMCall]
    decisions: list[BreakerDecision]

    @property
    def last_label(self) -> str:
        """The latest decision, for people: "forced open", "half-opened", ..."""
        return LABELS.get(self.decisions[0].decision, self.decisions[0].decision) if self.decisions else ""

    @property
    def name(self) -> str:
        return breaker.name(self.state.provider, self.state.model)

    def as_dict(self) -> dict[str, Any]:
        s = self.state
        return {
            "provider": s.provider,
            "model": s.model,
            "state": s.state,
            "until": s.until.isoformat() if s.until else None,
            "failures_in_a_row": s.failures,
            "window_calls": s.window_calls,
            "window_errors": s.window_errors,
            "held": self.held_count,
            "held_runs": [w.run_id for w in self.held],
            "recent_errors": [{"at": c.created_at.isoformat(), "error": c.error} for c in self.errors],
            "decisions": [
                {
                    "at": d.at.isoformat(),
                    "decision": d.decision,
                    "state": d.state,
                    "until": d.until.isoformat() if d.until else None,
                    "reason": d.reason,
                }
                for d in self.decisions
            ],
        }


@dataclass(frozen=True)
class RateView:
    provider: str
    rpm: int | None
    tpm: int | None
    requests: int
    tokens: int
    held: int


def pairs() -> list[tuple[str, str]]:
    """The breakers to show: every one known, and each provider's default model."""
    found = set(breaker.known())
    found |= set(LLMProvider.objects.values_list("name", "default_model"))
    return sorted(found)


def view(provider: str, model: str) -> BreakerView:
    name = breaker.name(provider, model)
    held = holds.held_behind(name)
    return BreakerView(
        state=breaker.read(provider, model),
        held=held[:20],
        held_count=len(held),
        errors=list(
            LLMCall.objects.filter(provider=provider, model=model).exclude(error="").order_by("-id")[:RECENT]
        ),
        decisions=list(
            BreakerDecision.objects.filter(provider=provider, model=model).order_by("-id")[:RECENT]
        ),
    )


def health() -> list[BreakerView]:
    """Every breaker, open ones first."""
    found = [view(p, m) for p, m in pairs()]
    order = {breaker.OPEN: 0, breaker.HALF_OPEN: 1, breaker.CLOSED: 2}
    return sorted(found, key=lambda v: (order.get(v.state.state, 3), v.name))


def rate_views() -> list[RateView]:
    """The providers with a request or token limit, with their window's figures."""
    found = []
    for row in LLMProvider.objects.exclude(rpm_limit=None, tpm_limit=None):
        requests, tokens = rates.in_window(row.name)
        held = len(holds.held_behind(f"{holds.RATE}:{row.name}"))
        found.append(RateView(row.name, row.rpm_limit, row.tpm_limit, requests, tokens, held))
    return found


def check_breaker(provider: Any, model: Any) -> tuple[str, str]:
    """Return a known provider's breaker; NotFound naming what is unknown."""
    if not isinstance(provider, str) or not isinstance(model, str) or not model:
        raise NotFound("Name a provider and one of its models.")
    row = LLMProvider.objects.filter(name=provider).first()
    if row is None and (provider, model) not in set(breaker.known()):
        raise NotFound(f"No LLM provider named {provider!r}.")
    if (
        row is not None
        and model not in row.models_offered()
        and (provider, model) not in set(breaker.known())
    ):
        raise NotFound(f"Provider {provider!r} does not offer model {model!r}.")
    return provider, model


def parse_force(data: dict[str, Any]) -> tuple[str, int | None, str]:
    """Check a forced decision: state open or closed, seconds (open only), a reason."""
    problems = []
    state = data.get("state")
    if state not in (breaker.OPEN, breaker.CLOSED):
        problems.append(Issue("state", "state must be open or closed."))
    seconds = data.get("seconds")
    if seconds in (None, ""):
        seconds = DEFAULT_FORCE_SECONDS if state == breaker.OPEN else None
    elif isinstance(seconds, str) and seconds.strip().isdigit():
        seconds = int(seconds)
    if seconds is not None and (
        isinstance(seconds, bool) or not isinstance(seconds, int) or not 1 <= seconds <= MAX_FORCE_SECONDS
    ):
        problems.append(Issue("seconds", f"seconds must be a whole number from 1 to {MAX_FORCE_SECONDS}."))
    reason = data.get("reason") or ""
    if not isinstance(reason, str) or len(reason) > 500:
        problems.append(Issue("reason", "reason must be text of at most 500 characters."))
    if problems:
        raise Invalid("The forced decision is invalid.", issues=problems)
    return str(state), seconds if state == breaker.OPEN else None, str(reason)


def force(provider: str, model: str, data: dict[str, Any], actor: Any = None) -> BreakerView:
    """Force a breaker open (for `seconds`) or closed, by a person's decision; audit it.
    Closing releases the attempts held behind it at once."""
    provider, model = check_breaker(provider, model)
    state, seconds, reason = parse_force(data)
    until = timezone.now() + timedelta(seconds=seconds) if seconds else None
    person = breaker.person_of(actor)
    who = getattr(person, "username", None) or "system"
    breaker.force(provider, model, state, until, reason or f"forced {state} by {who}", actor)
    audit.record_about(
        actor,
        f"breaker.force_{state}",
        "breaker",
        breaker.name(provider, model),
        until=until.isoformat() if until else None,
        reason=reason,
    )
    if state == breaker.CLOSED:
        holds.offer_held()
    return view(provider, model)


# field -> (what it is, least, most, whole number)
LIMIT_FIELDS: dict[str, tuple[str, float, float, bool]] = {
    "rpm_limit": ("requests per minute (empty: no limit)", 1, 10_000_000, True),
    "tpm_limit": ("tokens per minute (empty: no limit)", 1, 10_000_000_000, True),
    "breaker_failures": ("faults in a row that open the breaker", 1, 1000, True),
    "breaker_error_rate": ("the error rate that opens it, from 0.01 to 1", 0.01, 1, False),
    "breaker_window_seconds": ("seconds the error rate is counted over", 1, 86400, False),
    "breaker_min_calls": ("calls in the window before the rate counts", 1, 100_000, True),
    "breaker_open_seconds": ("seconds it stays open without a Retry-After", 0.1, 86400, False),
}
OPTIONAL = ("rpm_limit", "tpm_limit")


def limits_of(row: LLMProvider) -> dict[str, Any]:
    return {field: getattr(row, field) for field in LIMIT_FIELDS}


def parse_limits(data: dict[str, Any]) -> dict[str, Any]:
    """Check a provider's limits and breaker settings; Invalid naming each bad field."""
    found: dict[str, Any] = {}
    problems = []
    for field, (what, least, most, whole) in LIMIT_FIELDS.items():
        value = data.get(field)
        if isinstance(value, str):
            value = value.strip() or None
        if value is None:
            if field not in OPTIONAL:
                problems.append(Issue(field, f"{field}: give the {what}."))
            found[field] = None
            continue
        number = as_number(value, whole)
        if number is None or not least <= number <= most:
            kind = "a whole number" if whole else "a number"
            span = f"from {least:,.10g} to {most:,.0f}"
            problems.append(Issue(field, f"{field}: give {kind} {span} ({what})."))
        found[field] = number
    if problems:
        raise Invalid("The provider's limits are invalid.", issues=problems)
    return found


def as_number(value: Any, whole: bool) -> float | int | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if number != number or number in (float("inf"), float("-inf")):
        return None
    if whole:
        return int(number) if number == int(number) else None
    return number


def save_limits(name: str, data: dict[str, Any], actor: Any = None) -> LLMProvider:
    """Set a provider's request/token limits and breaker settings (admins); audited. Every
    worker applies them within policy.CACHE_SECONDS."""
    values = parse_limits(data)
    row = LLMProvider.objects.filter(name=name).first()
    if row is None:
        raise NotFound(f"There is no LLM provider named {name[:80]!r}.")
    LLMProvider.objects.filter(pk=row.pk).update(**values)
    row.refresh_from_db()
    policy.forget()
    providers.EPOCH.changed()  # no signal for update(): the rows remembered by resolve follow now
    audit.record(actor, "llm_provider.limits", row, **values)
    return row
