"""Periodic duties: work the domain hands the scheduler to run on its clock.

The scheduler owns the clock and the reconciler's lock; the domain owns what is done (fire
wait deadlines and schedules, prune old runs, deliver webhooks). Each domain package
registers its duty at app start (workflows/apps.py), so the runtime never imports it.
A duty returns how much it did (the scheduler's tick counts it). An `exclusive` duty runs
only in the scheduler that holds the reconciler's lock, one at a time across the fleet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Duty:
    name: str
    every_seconds: float
    run: Callable[[], int]
    exclusive: bool = False


DUTIES: dict[str, Duty] = {}


def register(duty: Duty) -> None:
    """Add a duty (at app start); registering a name again replaces it."""
    DUTIES[duty.name] = duty


def periodic() -> list[Duty]:
    return [duty for duty in DUTIES.values() if not duty.exclusive]


def exclusive() -> list[Duty]:
    return [duty for duty in DUTIES.values() if duty.exclusive]
