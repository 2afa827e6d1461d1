#!/usr/bin/env python3
"""A suite of N recorded runs in `recorded` mode beside N ordinary runs of the same workflow.

    .venv/bin/python bench/suite_bench.py            # N=50
    .venv/bin/python bench/suite_bench.py --cases 200

On bench/dashboard_bench.py's embedded servers (database recreated): two RQ workers and one
scheduler as processes, and the tests' fake OpenAI-compatible provider (tests/fakes, answers
at once, counts calls). The workflow is a chain of three `llm.chat` nodes. First N ordinary
runs are started at once and waited for (their calls live: the provider is called 3N times);
then a suite is built from those N runs (each case: its input, the run as origin, its final
output expected) and run against the same version in `recorded` mode: every call is answered
from the record. Printed for each: the wall time from the first start to the last run's end
(and, for the suite, to its evaluation by the scheduler's duty), node executions per second,
and the provider calls made. Figures only: nothing is asserted.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import harness
from dashboard_bench import DATA_DIR, REPO, Bench, services

sys.path.insert(0, str(REPO))

NODES = ("plan", "draft", "review")


def definition() -> dict[str, Any]:
    nodes = [
        {"id": n, "handler": "llm.chat", "config": {"prompt": f"{n} for {{input.topic}}"}} for n in NODES
    ]
    edges = [{"source": a, "target": b} for a, b in zip(NODES, NODES[1:], strict=False)]
    return {"nodes": nodes, "edges": edges}


def wait(predicate: Any, timeout: float, what: str) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return time.perf_counter()
        time.sleep(0.05)
    raise RuntimeError(f"{what}: not done after {timeout:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=50)
    args = parser.parse_args()
    from tests.fakes.llm_server import FakeLLMServer

    with FakeLLMServer() as llm:
        bench = Bench(args)
        bench.prepare()
        bench.env.update({"LLM_BASE_URL": llm.base_url, "LLM_MODEL": "fake-model"})
        python = str(harness.VENV_BIN / "python")
        for i in (1, 2):
            cmd = [python, "manage.py", "rqworker", "--name", f"suite-w{i}", "default", "agents"]
            bench.procs.append(harness.spawn(cmd, f"worker-{i}", "workers", bench.env, bench.logdir))
        cmd = [python, "manage.py", "runscheduler", "--name", "suite-s1"]
        bench.procs.append(harness.spawn(cmd, "scheduler", "scheduler", bench.env, bench.logdir))
        try:
            measure(bench, llm, args.cases)
        finally:
            harness.stop(bench.procs)
            if bench.started_services:
                services.down(DATA_DIR)


def measure(bench: Bench, llm: Any, n: int) -> None:
    from workflows.core.states import RUN_FINISHED
    from workflows.runs import actions as runs
    from workflows.store.models import Run
    from workflows.store.suites import SuiteRun
    from workflows.suites import building, running
    from workflows.versions import publish as versions

    workflow = versions.create_workflow("suite-bench", "Suite bench")
    versions.publish_version(versions.create_version(workflow, definition()))
    workflow.refresh_from_db()
    warm = [runs.start_run(workflow, {"topic": f"warm {i}"})[0].pk for i in range(5)]
    wait(lambda: Run.objects.filter(pk__in=warm, status__in=RUN_FINISHED).count() == 5, 120, "warm-up")

    calls = len(llm.requests)
    began = time.perf_counter()
    ids = [runs.start_run(workflow, {"topic": f"topic {i}"})[0].pk for i in range(n)]
    ended = wait(lambda: Run.objects.filter(pk__in=ids, status__in=RUN_FINISHED).count() == n, 600, "runs")
    report("ordinary runs", n, ended - began, len(llm.requests) - calls)

    picked = building.picked_runs(workflow, ids)
    suite = building.create_suite(workflow, "bench", cases=[building.case_of_run(r) for r in picked])
    calls = len(llm.requests)
    began = time.perf_counter()
    suite_run = running.start_suite_run(suite, calls="recorded")
    case_ids = list(suite_run.cases.values_list("run_id", flat=True))
    ended = wait(
        lambda: Run.objects.filter(pk__in=case_ids, status__in=RUN_FINISHED).count() == n, 600, "cases"
    )
    evaluated = wait(
        lambda: SuiteRun.objects.filter(pk=suite_run.pk, evaluated_at__isnull=False).exists(),
        600,
        "evaluation",
    )
    report("recorded suite", n, ended - began, len(llm.requests) - calls)
    row = SuiteRun.objects.get(pk=suite_run.pk)
    print(f"{'':16} evaluated {evaluated - began:.2f} s after its start: {row.summary}", flush=True)


def report(name: str, n: int, wall: float, calls: int) -> None:
    executions = n * len(NODES)
    print(
        f"{name:16} {n} runs, {executions} node executions in {wall:.2f} s: "
        f"{executions / wall:.1f} node executions/s; provider calls {calls}",
        flush=True,
    )


if __name__ == "__main__":
    main()
