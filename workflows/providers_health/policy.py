"""A provider's limits and breaker settings, as the gate reads them before each call.

Read from the LLMProvider row, kept in the process for CACHE_SECONDS: a gate that read the
row on every call would add a query to each; an admin's change reaches every worker within
that time. The settings provider ("default", no row) has no rate limits and the defaults.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from django.conf import settings

from workflows.store.models import LLMProvider

CACHE_SECONDS = 2.0


@dataclass(frozen=True)
class Policy:
    provider: str
    rpm: int | None
    tpm: int | None
    failures: int = 5
    error_rate: float = 0.5
    window_seconds: float = 60.0
    min_calls: int = 20
    open_seconds: float = 30.0
    timeout_seconds: float = 60.0

    @property
    def has_rates(self) -> bool:
        return bool(self.rpm or self.tpm)

    def per_window(self, per_minute: int | None) -> int:
        """A per-minute limit over the rate window (rates.window_seconds), at least 1; 0: none."""
        if not per_minute:
            return 0
        return max(1, math.floor(per_minute * rate_window_seconds() / 60.0))


def rate_window_seconds() -> float:
    """The window the per-minute limits are counted over (60 s unless a test shortens it)."""
    return float(settings.SWITCHYARD["PROVIDER_RATE_WINDOW_SECONDS"])


_cache: dict[str, tuple[float, Policy]] = {}


def policy_of(provider: str) -> Policy:
    """Return the provider's policy, at most CACHE_SECONDS old."""
    now = time.monotonic()
    found = _cache.get(provider)
    if found is not None and now - found[0] < CACHE_SECONDS:
        return found[1]
    policy = read_policy(provider)
    _cache[provider] = (now, policy)
    return policy


def read_policy(provider: str) -> Policy:
    row = LLMProvider.objects.filter(name=provider).first()
    if row is None:
        return Policy(provider, None, None)
    return Policy(
        provider=row.name,
        rpm=row.rpm_limit,
        tpm=row.tpm_limit,
        failures=row.breaker_failures,
        error_rate=row.breaker_error_rate,
        window_seconds=row.breaker_window_seconds,
        min_calls=row.breaker_min_calls,
        open_seconds=row.breaker_open_seconds,
        timeout_seconds=row.timeout_seconds,
    )


def forget() -> None:
    """Drop the cached policies (a provider was saved in this process)."""
    _cache.clear()
