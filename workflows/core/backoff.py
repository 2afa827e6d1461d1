"""Delays between attempts: exponential from a first delay, capped, spread by jitter.

One function for every retry in the house: a node's next attempt (``RetryPolicy.delay``)
and a webhook's next delivery (``webhooks.backoff``). Pure: the caller draws the random
number and adds the delay to its own clock, so the same inputs always give the same delay.
"""

from __future__ import annotations

from typing import Final

# 2.0 ** 1024 overflows a float; any first delay doubled this often is past every cap.
MAX_DOUBLINGS: Final = 1000


def backoff_delay(attempt: int, rand: float, *, first: float, cap: float, jitter: float) -> float:
    """Return seconds to wait after attempt number ``attempt`` (1-based) failed.

    ``first * 2 ** (attempt - 1)``, at most ``cap``, then spread by +/- ``jitter`` of itself
    (``rand`` in [0, 1) picks where: 0 is the shortest, 0.5 the middle); never negative.
    """
    doublings = min(max(attempt, 1) - 1, MAX_DOUBLINGS)
    base = min(cap, first * 2.0**doublings)
    spread = jitter * (2 * min(max(rand, 0.0), 1.0) - 1)
    return max(0.0, base * (1 + spread))
