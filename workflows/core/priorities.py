"""Run priorities: the range, the default, the urgent lane and aging (pure).

A run's priority is an integer from LOWEST to HIGHEST, default 0. Where it takes effect:
- the RQ lane: the jobs of runs above 0 go to their queue's urgent lane (`lane`), which
  workers take before the plain queue, so an urgent node overtakes a backlog already in
  Redis. RQ lists are FIFO, so two lanes are all the ordering Redis can give cheaply;
- the claim order of nodes held by a concurrency cap or a rate limit: the oldest-first order
  becomes highest effective priority first (`effective`), with aging, so a low priority held
  long enough overtakes a fresh high one.
Workers also take one job in every AGING_EVERY from the plain queues first, so a stream of
urgent work never starves the plain lane (runtime/worker.py).
"""

from __future__ import annotations

LOWEST = -100
HIGHEST = 100
DEFAULT = 0
URGENT_SUFFIX = "-urgent"
AGING_SECONDS = 10.0  # a held node gains one priority step for every this many seconds held
AGING_EVERY = 8  # a worker takes one pop in this many from the plain queues first


def check_priority(value: object, field: str = "priority") -> str | None:
    """Return what is wrong with a priority (naming `field`), or None when it is valid."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{field} must be an integer from {LOWEST} to {HIGHEST}."
    if not LOWEST <= value <= HIGHEST:
        return f"{field} is {value}; it must be from {LOWEST} (lowest) to {HIGHEST} (highest)."
    return None


def is_urgent(priority: int) -> bool:
    return priority > DEFAULT


def lane(queue: str, priority: int) -> str:
    """The RQ queue a node of `queue` is pushed to at this priority."""
    return queue + URGENT_SUFFIX if is_urgent(priority) else queue


def lanes(queues: list[str]) -> list[str]:
    """The RQ queues a worker of `queues` listens to, urgent lanes first."""
    plain = [q for q in queues if not q.endswith(URGENT_SUFFIX)]
    return [q + URGENT_SUFFIX for q in plain] + plain


def effective(priority: int, waited_seconds: float, aging_seconds: float = AGING_SECONDS) -> float:
    """The priority a held node is offered at: its run's, plus one step per `aging_seconds` held."""
    return priority + max(0.0, waited_seconds) / aging_seconds
