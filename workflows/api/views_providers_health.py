"""Provider health: each breaker's state, recent errors and held attempts, the rates' figures
(viewers); forcing a breaker open or closed (operators, audited); a provider's limits and
breaker settings (admins).

Thin: every answer and change is one call into workflows/providers_health/manage.py, the
page's own; each bad field is an entry of the 422's `errors`, by name.
"""

from __future__ import annotations

from typing import Annotated, Any

from django.http import HttpRequest
from ninja import Path, Router
from pydantic import Field
from typing_extensions import TypedDict

from workflows.api.auth import ApiRequest, allowed
from workflows.api.inputs import Body
from workflows.api.schema import refuses
from workflows.providers_health import manage

router = Router(tags=["provider health"])
ProviderName = Annotated[str, Path(pattern=r"^[a-z][a-z0-9_-]{0,59}$")]


class ForceIn(Body):
    model: str = Field(min_length=1, max_length=200, description="The breaker's model")
    state: str = Field(max_length=20, description="open or closed")
    seconds: int | None = Field(
        None, description=f"How long it stays open (default {manage.DEFAULT_FORCE_SECONDS}); not for closed"
    )
    reason: str = Field("", max_length=2000)


class LimitsIn(Body):
    rpm_limit: int | None = Field(None, description="Requests per minute; null: no limit")
    tpm_limit: int | None = Field(None, description="Tokens per minute; null: no limit")
    breaker_failures: int = Field(5, description="Faults in a row that open a breaker")
    breaker_error_rate: float = Field(0.5, description="The error rate that opens it (0.01 to 1)")
    breaker_window_seconds: float = Field(60.0, description="Seconds the error rate is counted over")
    breaker_min_calls: int = Field(20, description="Calls in the window before the rate counts")
    breaker_open_seconds: float = Field(30.0, description="Seconds it stays open without a Retry-After")


class ErrorOut(TypedDict):
    at: str
    error: str


class DecisionOut(TypedDict):
    at: str
    decision: Annotated[str, Field(description="opened, half_opened, closed, forced_open or forced_closed")]
    state: str
    until: str | None
    reason: str


class BreakerOut(TypedDict):
    provider: str
    model: str
    state: Annotated[str, Field(description="closed, open or half_open (one probe call in flight)")]
    until: Annotated[str | None, Field(description="When an open breaker lets a probe go")]
    failures_in_a_row: int
    window_calls: int
    window_errors: int
    held: Annotated[int, Field(description="Attempts held until it closes")]
    held_runs: list[int]
    recent_errors: list[ErrorOut]
    decisions: list[DecisionOut]


class RateOut(TypedDict):
    provider: str
    rpm_limit: int | None
    tpm_limit: int | None
    requests_in_window: int
    tokens_in_window: int
    held: int


class ProviderHealthOut(TypedDict):
    breakers: list[BreakerOut]
    rates: list[RateOut]


class LimitsOut(TypedDict):
    provider: str
    rpm_limit: int | None
    tpm_limit: int | None
    breaker_failures: int
    breaker_error_rate: float
    breaker_window_seconds: float
    breaker_min_calls: int
    breaker_open_seconds: float


@router.get(
    "/providers/health", response=ProviderHealthOut, auth=allowed("view"), summary="Read provider health"
)
def read_provider_health(request: HttpRequest) -> Any:
    """Every breaker (open ones first) with its recent errors and held attempts, and each
    provider's request/token window."""
    rates = [
        {
            "provider": r.provider,
            "rpm_limit": r.rpm,
            "tpm_limit": r.tpm,
            "requests_in_window": r.requests,
            "tokens_in_window": r.tokens,
            "held": r.held,
        }
        for r in manage.rate_views()
    ]
    return {"breakers": [v.as_dict() for v in manage.health()], "rates": rates}


@router.post(
    "/providers/{name}/breaker",
    response=BreakerOut,
    auth=allowed("force_breaker"),
    summary="Force a provider's breaker open or closed",
)
@refuses(404)
def force_breaker(request: ApiRequest, name: ProviderName, body: ForceIn) -> Any:
    """Open the breaker of (provider, model) for `seconds` (its calls are held, not failed),
    or close it (the held attempts are released at once); audited."""
    return manage.force(name, body.model, body.model_dump(), actor=request.auth).as_dict()


@router.put(
    "/providers/{name}/limits",
    response=LimitsOut,
    auth=allowed("manage_llm"),
    summary="Set a provider's rate limits and breaker settings",
)
@refuses(404)
def save_provider_limits(request: ApiRequest, name: ProviderName, body: LimitsIn) -> Any:
    """Set the provider's requests/tokens per minute (shared by every worker) and the
    settings of its breakers; workers apply them within two seconds."""
    row = manage.save_limits(name, body.model_dump(), actor=request.auth)
    return {"provider": row.name, **manage.limits_of(row)}
