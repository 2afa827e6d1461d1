#!/usr/bin/env python3
"""Budgets: what admission costs an LLM call (reserve before, settle after), beside none.

    .venv/bin/python bench/budgets_bench.py                          # 50 processes, 40 calls each
    .venv/bin/python bench/budgets_bench.py --callers 2 --calls 300
    .venv/bin/python bench/budgets_bench.py --threads                # 50 threads of one process

On bench/dashboard_bench.py's embedded servers (database recreated), CALLERS processes (each
with its own PostgreSQL connection, as 50 agent runs spread over workers would be) each pass CALLS calls through the runtime's call gate
(runtime/admission.py: `admit`, then `settle` with a usage), under: no budget (the gate
reads the budgets, finds none), one global budget, and three budgets (global, the
workflow's, a tenant's) that every call falls under. All callers share the budgets' ledger
rows, so their reservations serialise on those rows' locks: the worst case for contention.
Prints, per case, the p50 and p95 of one call's admit + settle and the calls per second.
"""

from __future__ import annotations

import argparse
import multiprocessing
import queue
import statistics
import sys
import threading
import time
from typing import Any

from dashboard_bench import REPO, Bench

sys.path.insert(0, str(REPO))


def measure(calls: list[Any], per_caller: int, threads: bool) -> tuple[list[float], float]:
    """Run each caller's calls in a process of its own (forked, so no GIL is shared: as
    separate workers would), or a thread (`threads`: as one worker's slots would, sharing
    the GIL); return each call's seconds and the wall time."""
    from django.db import connection

    connection.close()  # each caller opens its own
    context: Any = threading if threads else multiprocessing.get_context("fork")
    results: Any = queue.Queue() if threads else context.Queue()
    start = context.Event()

    def caller(call: Any) -> None:
        from workflows.runtime import admission

        mine = []
        start.wait()
        for _ in range(per_caller):
            began = time.perf_counter()
            admitted = admission.admit(call)
            admission.settle(admitted, 10, 3, ok=True)
            mine.append(time.perf_counter() - began)
        connection.close()
        results.put(mine)

    runner = context.Thread if threads else context.Process
    procs = [runner(target=caller, args=(call,)) for call in calls]
    for proc in procs:
        proc.start()
    began = time.perf_counter()
    start.set()
    took: list[float] = []
    for _ in procs:
        took.extend(results.get())
    wall = time.perf_counter() - began
    for proc in procs:
        proc.join()
    return took, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--callers", type=int, default=50)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--threads", action="store_true", help="callers are threads of this process")
    args = parser.parse_args()
    bench = Bench(args)
    bench.prepare()
    from workflows.budgets import manage
    from workflows.runtime import admission
    from workflows.store.models import NodeRun

    calls = []
    for n in range(args.callers):
        run, _ = bench.runs.start_run(bench.workflow, {"user_id": f"u-{n}", "customer_id": "acme"})
        node = NodeRun.objects.filter(run=run).order_by("id").first()
        assert node is not None
        messages = [{"role": "user", "content": f"Summarise the profile of u-{n}, please."}]
        calls.append(admission.Call(node.pk, run.pk, node.node_id, 1, "default", "m", messages, None, 200))
    cases = [
        ("no budget", []),
        ("one global budget", [{"scope": "global"}]),
        (
            "three budgets",
            [
                {"scope": "global"},
                {"scope": "workflow", "workflow": bench.workflow.slug},
                {"scope": "tenant", "tenant_key": "customer_id"},
            ],
        ),
    ]
    for name, budgets in cases:
        for n, fields in enumerate(budgets):
            base = {"name": f"{name} {n}", "unit": "tokens", "amount": 10**11, "window": "day"}
            manage.save_budget({**base, **fields})
        took, wall = measure(calls, args.calls, args.threads)
        took.sort()
        p50, p95 = statistics.median(took), took[int(len(took) * 0.95)]
        print(
            f"{name:18} {len(took)} calls by {args.callers} callers: admit+settle p50 {p50 * 1000:.2f} ms, "
            f"p95 {p95 * 1000:.2f} ms; {len(took) / wall:.0f} calls/s",
            flush=True,
        )
        from workflows.store.models import Budget

        Budget.objects.all().delete()


if __name__ == "__main__":
    main()
