"""Rolling windows of what finished recently: pure, the clock is a parameter.

The broadcaster feeds every finished node attempt and every finished run into one
`Windows`; snapshots read per-node success and failure counts and duration percentiles over
the last NODE_WINDOW seconds, per-workflow run outcomes over the last minute and hour, and
node executions per second over the last minute. Memory is bounded: per-second buckets, and
at most DURATION_SAMPLES durations per node.
"""

from __future__ import annotations

import math
from collections import defaultdict, deque
from dataclasses import dataclass, field

NODE_WINDOW = 300  # seconds of per-node history (counts, durations)
RATE_WINDOW = 60  # seconds shown by the executions-per-second chart
HOUR = 3600
DURATION_SAMPLES = 2000


def percentile(values: list[float], q: float) -> float | None:
    """Return the q-th percentile (0..100) of values by nearest rank, or None if empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass
class NodeWindow:
    buckets: deque[list[int]] = field(default_factory=deque)  # [second, succeeded, failed]
    durations: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=DURATION_SAMPLES))

    def add(self, second: int, ok: bool, duration: float | None) -> None:
        bucket = find_bucket(self.buckets, second, 3)
        bucket[1 if ok else 2] += 1
        if duration is not None:
            self.durations.append((second, duration))

    def prune(self, oldest: int) -> None:
        while self.buckets and self.buckets[0][0] < oldest:
            self.buckets.popleft()
        while self.durations and self.durations[0][0] < oldest:
            self.durations.popleft()


def find_bucket(buckets: deque[list[int]], second: int, width: int) -> list[int]:
    """Return the bucket of `second`, creating it; late arrivals land in their own second."""
    for bucket in reversed(buckets):
        if bucket[0] == second:
            return bucket
        if bucket[0] < second:
            break
    new = [second] + [0] * (width - 1)
    buckets.append(new)
    if len(buckets) > 1 and buckets[-2][0] > second:  # rare: an old event arrived late
        ordered = sorted(buckets, key=lambda b: b[0])
        buckets.clear()
        buckets.extend(ordered)
    return new


@dataclass
class Windows:
    nodes: dict[tuple[int, str], NodeWindow] = field(default_factory=lambda: defaultdict(NodeWindow))
    runs: dict[int, deque[list[int]]] = field(default_factory=lambda: defaultdict(deque))  # [sec, ok, failed]
    executions: deque[list[int]] = field(default_factory=deque)  # [second, count]

    def add_attempt(
        self, workflow_id: int, node_id: str, at: float, ok: bool, duration: float | None
    ) -> None:
        second = int(at)
        self.nodes[(workflow_id, node_id)].add(second, ok, duration)
        find_bucket(self.executions, second, 2)[1] += 1

    def add_run(self, workflow_id: int, at: float, status: str) -> None:
        if status in ("succeeded", "failed"):
            find_bucket(self.runs[workflow_id], int(at), 3)[1 if status == "succeeded" else 2] += 1

    def seed_runs(self, workflow_id: int, second: int, succeeded: int, failed: int) -> None:
        """Add run outcomes counted elsewhere (Postgres, at start-up) to the hour window."""
        bucket = find_bucket(self.runs[workflow_id], second, 3)
        bucket[1] += succeeded
        bucket[2] += failed

    def prune(self, now: float) -> None:
        for window in self.nodes.values():
            window.prune(int(now) - NODE_WINDOW)
        for buckets in self.runs.values():
            while buckets and buckets[0][0] < int(now) - HOUR:
                buckets.popleft()
        while self.executions and self.executions[0][0] < int(now) - RATE_WINDOW:
            self.executions.popleft()

    def node_stats(self, workflow_id: int, now: float) -> dict[str, dict[str, float | int | None]]:
        """Return node id -> succeeded, failed, p50 and p95 duration (ms) over NODE_WINDOW."""
        oldest = int(now) - NODE_WINDOW
        stats = {}
        for (wf, node_id), window in self.nodes.items():
            if wf != workflow_id:
                continue
            durations = [d for s, d in window.durations if s >= oldest]
            stats[node_id] = {
                "succeeded": sum(b[1] for b in window.buckets if b[0] >= oldest),
                "failed": sum(b[2] for b in window.buckets if b[0] >= oldest),
                "p50_ms": rounded(percentile(durations, 50)),
                "p95_ms": rounded(percentile(durations, 95)),
            }
        return stats

    def run_counts(self, workflow_id: int, now: float) -> dict[str, int]:
        buckets = self.runs.get(workflow_id, ())
        minute = int(now) - 60
        hour = int(now) - HOUR
        return {
            "succeeded_1m": sum(b[1] for b in buckets if b[0] >= minute),
            "failed_1m": sum(b[2] for b in buckets if b[0] >= minute),
            "succeeded_1h": sum(b[1] for b in buckets if b[0] >= hour),
            "failed_1h": sum(b[2] for b in buckets if b[0] >= hour),
        }

    def rate_series(self, now: float) -> list[int]:
        """Node executions in each of the last RATE_WINDOW whole seconds, oldest first."""
        end = int(now)
        counts = {b[0]: b[1] for b in self.executions}
        return [counts.get(second, 0) for second in range(end - RATE_WINDOW, end)]


def rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
