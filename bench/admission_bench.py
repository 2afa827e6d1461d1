#!/usr/bin/env python3
"""Admission of LLM calls: what it costs a call, and how fast held nodes wake when a breaker closes.

    .venv/bin/python bench/admission_bench.py                     # 50 processes, 40 calls each; 200 held runs
    .venv/bin/python bench/admission_bench.py --callers 2 --calls 300 --held 100
    .venv/bin/python bench/admission_bench.py --skip-wake         # the cost per call only

On bench/dashboard_bench.py's embedded servers (database recreated):

1. Cost per call. CALLERS processes (as 50 agent runs spread over workers would be) each
   pass CALLS calls through the runtime's call gate (`admission.admit`, then `settle` with a
   usage, as the llm handler does), with the gates set to: none (a call without admission);
   the provider breaker alone (one Redis script before, one after); the breaker and a
   provider with requests/tokens-per-minute limits (one more script each way); the budgets
   (one global budget, reserve + settle in PostgreSQL) and the breaker, as a deployment with
   a budget runs. Prints p50/p95 of one call's admit + settle and the calls per second.
2. Wake-up delay. Two workers, a scheduler (real processes), a fake provider that answers
   503 for a while: HELD llm.chat runs are held behind the open breaker; when the outage
   ends, the next probe closes it and the closing call releases them. Prints, per node, the
   delay from the `closed` decision (PostgreSQL) to the node's attempt starting again, p50/p95;
   then the same after an operator's forced close.
Figures only; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

from budgets_bench import measure
from dashboard_bench import REPO, Bench

sys.path.insert(0, str(REPO))


def spread(values: list[float]) -> str:
    values = sorted(values)
    if not values:
        return "none"
    p95 = values[min(len(values) - 1, int(len(values) * 0.95))]
    return (
        f"p50 {statistics.median(values):.0f} ms, p95 {p95:.0f} ms, max {values[-1]:.0f} ms (n={len(values)})"
    )


def cost_per_call(bench: Bench, args: argparse.Namespace) -> None:
    from workflows.budgets import manage
    from workflows.budgets.gate import BudgetGate
    from workflows.providers_health.gate import ProviderGate
    from workflows.runtime import admission
    from workflows.store.models import Budget, LLMProvider, NodeRun

    LLMProvider.objects.create(
        name="limited",
        base_url="https://llm.bench.test/v1",
        default_model="m",
        rpm_limit=10**7,
        tpm_limit=10**9,
    )
    calls: dict[str, list[Any]] = {"default": [], "limited": []}
    for n in range(args.callers):
        run, _ = bench.runs.start_run(bench.workflow, {"user_id": f"u-{n}", "customer_id": "acme"})
        node = NodeRun.objects.filter(run=run).order_by("id").first()
        assert node is not None
        messages = [{"role": "user", "content": f"Summarise the profile of u-{n}, please."}]
        for provider in calls:
            calls[provider].append(
                admission.Call(node.pk, run.pk, node.node_id, 1, provider, "m", messages, None, 200)
            )
    cases = [
        ("no admission", [], "default", False),
        ("breaker", [ProviderGate()], "default", False),
        ("breaker + rpm/tpm", [ProviderGate()], "limited", False),
        ("budget + breaker", [BudgetGate(), ProviderGate()], "default", True),
    ]
    for name, gates, provider, budget in cases:
        admission.GATES[:] = gates  # the callers fork from here: they inherit these gates
        if budget:
            base = {"name": "bench", "unit": "tokens", "amount": 10**11, "window": "day", "scope": "global"}
            manage.save_budget(base)
        took, wall = measure(calls[provider], args.calls, args.threads)
        took.sort()
        p50, p95 = statistics.median(took), took[int(len(took) * 0.95)]
        print(
            f"{name:18} {len(took)} calls by {args.callers} callers: admit+settle p50 {p50 * 1000:.2f} ms, "
            f"p95 {p95 * 1000:.2f} ms; {len(took) / wall:.0f} calls/s",
            flush=True,
        )
        Budget.objects.all().delete()


def wake_up(bench: Bench, args: argparse.Namespace) -> None:
    from django.db import connection

    from tests.fakes.llm_server import FakeLLMServer
    from workflows.providers_health import breaker, manage
    from workflows.runs import actions as runs
    from workflows.store.models import BreakerDecision, LLMProvider, NodeRun, Run, Wait
    from workflows.versions import publish as versions

    with FakeLLMServer() as fake:
        LLMProvider.objects.create(
            name="flaky",
            base_url=fake.base_url,
            default_model="m",
            breaker_failures=3,
            breaker_open_seconds=1.0,
        )
        node = {
            "id": "ask",
            "handler": "llm.chat",
            "config": {"provider": "flaky", "prompt": "Answer {input.n}.", "max_tokens": 20},
            "retry": {"max_attempts": 5, "backoff_seconds": 0.2, "jitter": 0},
        }
        workflow = versions.create_workflow("bench-flaky", "Flaky")
        versions.publish_version(versions.create_version(workflow, {"nodes": [node], "edges": []}))
        workflow.refresh_from_db()

        def held() -> int:
            return Wait.objects.filter(kind="provider", closed_at__isnull=True).count()

        def started_after(ids: list[int], since: Any) -> list[float]:
            """Once every run finished: each node's delay from `since` to its attempt starting
            again (the probe itself, started before, is not counted)."""
            deadline = time.monotonic() + 120
            while Run.objects.filter(pk__in=ids, status="succeeded").count() < len(ids):
                if time.monotonic() > deadline:
                    raise RuntimeError("held runs did not all finish")
                time.sleep(0.1)
            rows = NodeRun.objects.filter(run_id__in=ids, started_at__gte=since).values_list(
                "started_at", flat=True
            )
            return [(at - since).total_seconds() * 1000 for at in rows]

        def wait_held(count: int) -> None:
            deadline = time.monotonic() + 120
            while held() < count and time.monotonic() < deadline:
                time.sleep(0.1)

        # A natural close: the outage ends, a probe succeeds, the closing call releases them.
        fake.outage(4.0, 503)
        items = [runs.StartItem({"n": n}) for n in range(args.held)]
        ids = [run.pk for run, _ in runs.start_runs(workflow, items)]
        most, closed = 0, None
        deadline = time.monotonic() + 120
        while closed is None and time.monotonic() < deadline:
            most = max(most, held())
            closed = BreakerDecision.objects.filter(provider="flaky", decision=breaker.CLOSED_AGAIN).first()
            time.sleep(0.05)
        assert closed is not None
        delays = started_after(ids, closed.at)
        print(
            f"closed by a probe: {most} runs held at most; {len(delays)} start again after it: {spread(delays)}"
        )

        # An operator's forced close.
        manage.force("flaky", "m", {"state": "open", "seconds": 600})
        ids = [run.pk for run, _ in runs.start_runs(workflow, items)]
        wait_held(args.held)
        with connection.cursor() as cur:
            cur.execute("SELECT clock_timestamp()")
            since = cur.fetchone()[0]
        manage.force("flaky", "m", {"state": "closed"})
        print(f"forced closed: {args.held} held runs start again: {spread(started_after(ids, since))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--callers", type=int, default=50)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--threads", action="store_true", help="callers are threads of this process")
    parser.add_argument("--held", type=int, default=200, help="runs held behind the breaker")
    parser.add_argument("--skip-wake", action="store_true")
    parser.add_argument("--skip-cost", action="store_true")
    args = parser.parse_args()
    os.environ["SWITCHYARD_EGRESS_ALLOW"] = (
        "127.0.0.1"  # the fake provider, on loopback (before settings load)
    )
    bench = Bench(args)
    bench.prepare()
    if not args.skip_cost:
        cost_per_call(bench, args)
    if args.skip_wake:
        return
    bench.start()
    try:
        from workflows.runtime import admission

        admission.GATES[:] = []
        from workflows.apps import wire_runtime

        wire_runtime()  # the gates back, for the forced close's release in this process
        wake_up(bench, args)
    finally:
        bench.stop()


if __name__ == "__main__":
    main()
