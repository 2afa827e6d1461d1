"""The one backoff of the house: node retries and webhook deliveries wait the same way."""

from __future__ import annotations

import pytest

from workflows.core.backoff import backoff_delay
from workflows.core.graph import RetryPolicy

WEBHOOK = {"first": 10.0, "cap": 3600.0, "jitter": 0.2}  # webhooks.backoff with the default setting


def old_webhook_backoff(attempts: int, rand: float) -> float:
    """The webhook formula before it moved to the core, kept here as the reference."""
    return min(3600.0, 10.0 * 2 ** min(attempts - 1, 20)) * (0.8 + 0.4 * rand)


@pytest.mark.parametrize("attempts", [1, 2, 3, 5, 8, 9, 12, 30])
@pytest.mark.parametrize("rand", [0.0, 0.1, 0.5, 0.75, 0.999999])
def test_webhook_deliveries_wait_as_before(attempts: int, rand: float) -> None:
    assert backoff_delay(attempts, rand, **WEBHOOK) == pytest.approx(old_webhook_backoff(attempts, rand))


@pytest.mark.parametrize(
    ("attempt", "expected"), [(1, 10.0), (2, 20.0), (3, 40.0), (9, 2560.0), (10, 3600.0), (500, 3600.0)]
)
def test_delay_doubles_from_the_first_delay_up_to_the_cap(attempt: int, expected: float) -> None:
    assert backoff_delay(attempt, 0.5, **WEBHOOK) == pytest.approx(expected)


def test_node_retry_policy_delays_through_the_same_function() -> None:
    policy = RetryPolicy(max_attempts=5, backoff_seconds=0.5, backoff_max_seconds=60, jitter=0.2)
    for attempt in (1, 4, 8, 10_000):
        for rand in (0.0, 0.3, 0.99):
            assert policy.delay(attempt, rand) == backoff_delay(attempt, rand, first=0.5, cap=60, jitter=0.2)


def test_attempt_zero_or_less_waits_like_the_first() -> None:
    assert backoff_delay(0, 0.5, **WEBHOOK) == backoff_delay(-3, 0.5, **WEBHOOK) == 10.0
