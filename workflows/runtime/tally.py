"""What this worker process has done: node attempts run and failed, and the last minute's rate.

In memory, written by the one thread that runs attempts (`execution.run_batch`) and read
by the heartbeat thread, which publishes it with every beat (`worker.beat`): the workers
page shows it without a Redis command on the path of a job.
"""

from __future__ import annotations

import time
from collections import deque

RATE_SECONDS = 60

processed = 0
failed = 0
recent: deque[tuple[int, int]] = deque()  # (second, attempts finished in it)
born = time.time()


def add(ok: bool, now: float | None = None) -> None:
    """Count one finished attempt."""
    global processed, failed
    processed += 1
    failed += 0 if ok else 1
    second = int(now if now is not None else time.time())
    if recent and recent[-1][0] == second:
        recent[-1] = (second, recent[-1][1] + 1)
    else:
        recent.append((second, 1))


def snapshot(now: float | None = None) -> dict[str, float | int]:
    """Counts since the process started, and attempts per second over the last minute."""
    now = now if now is not None else time.time()
    while recent and recent[0][0] <= now - RATE_SECONDS:
        recent.popleft()
    rate = sum(n for _, n in list(recent)) / RATE_SECONDS
    return {"processed": processed, "failed": failed, "per_second": round(rate, 2), "born": born}
