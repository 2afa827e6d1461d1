"""Redis keys of the dashboard: latest snapshots, the event cursor, totals for /metrics.

The broadcaster writes them; pages and /metrics read them. None of it is the only copy of
anything: snapshots are re-derived every tick, and totals are counters Prometheus tolerates
resetting (a flushed Redis starts them again from zero).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import Any, cast

from monitoring.services import events
from workflows.runtime import bus

LATEST_PREFIX = "sy:mon:latest:"
CURSOR = "sy:mon:cursor"
TOTALS = "sy:mon:totals"
LAST_TICK = "sy:mon:tick"
LATEST_TTL_SECONDS = 30
# Upper bounds (seconds) of the node duration histogram's buckets.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


def bucket_index(seconds: float) -> int:
    """Return the index of the first bucket holding `seconds` (len(DURATION_BUCKETS) = +Inf)."""
    for index, bound in enumerate(DURATION_BUCKETS):
        if seconds <= bound:
            return index
    return len(DURATION_BUCKETS)


class Totals:
    """Counts gathered during one tick, added to the Redis hash in one pipeline."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.sums: defaultdict[str, float] = defaultdict(float)  # seconds: a Counter holds ints

    def node_attempt(self, workflow_id: int, node_id: str, status: str, duration_ms: float | None) -> None:
        self.counts[f"n|{workflow_id}|{status}|{node_id}"] += 1
        if duration_ms is not None:
            self.counts[f"h|{workflow_id}|{bucket_index(duration_ms / 1000)}|{node_id}"] += 1
            self.sums[f"s|{workflow_id}|{node_id}"] += duration_ms / 1000

    def run_finished(self, workflow_id: int, status: str) -> None:
        self.counts[f"r|{workflow_id}|{status}"] += 1

    def write(self, pipe: Any) -> None:
        for key, n in self.counts.items():
            pipe.hincrby(TOTALS, key, n)
        for key, value in self.sums.items():
            pipe.hincrbyfloat(TOTALS, key, value)


def read_totals() -> dict[str, float]:
    return {k: float(v) for k, v in cast(dict[str, str], bus.client().hgetall(TOTALS)).items()}


def save_latest(pipe: Any, topic: str, message: events.Message) -> None:
    pipe.set(LATEST_PREFIX + topic, json.dumps(message), ex=LATEST_TTL_SECONDS)


def latest(topic: str) -> dict[str, Any] | None:
    """Return the last message the broadcaster sent on `topic` (None if it is not running)."""
    raw = bus.client().get(LATEST_PREFIX + topic)
    return json.loads(raw) if raw else None


def saved_cursor() -> int | None:
    raw = bus.client().get(CURSOR)
    return int(raw) if raw else None


def save_cursor(pipe: Any, cursor: int, now: float) -> None:
    pipe.set(CURSOR, cursor)
    pipe.set(LAST_TICK, now)


def last_tick() -> float | None:
    raw = bus.client().get(LAST_TICK)
    return float(raw) if raw else None
