"""Child runs and sagas, end to end: `.venv/bin/python bench/children_bench.py`.

Starts one scheduler and two RQ workers (real processes) against the waits bench's database
(recreated; see waits_bench.py) and prints, from PostgreSQL's timestamps:
- a one-node run alone, and the same run as the child of a `workflow.run` node: start to
  end (p50/p95, one run at a time), so the difference is what a child run costs;
- `BURST` runs started at once, alone and as parents: runs finished per second;
- the order saga with a declined card: the run's failure to its end `compensated` (one step).
Figures only; nothing here is asserted.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]
from waits_bench import log, prepare, spread, start_processes, stop_processes  # noqa: E402

SAMPLES = int(os.environ.get("SAMPLES") or 40)
BURST = int(os.environ.get("BURST") or 200)
LEAF = {"nodes": [{"id": "work", "handler": "core.noop"}]}
PARENT = {"nodes": [{"id": "call", "handler": "workflow.run", "config": {"workflow": "bench-leaf"}}]}


def main() -> None:
    env = prepare()
    from workflows.handlers.demo import DEMO_SAGA
    from workflows.runs import actions as runs
    from workflows.store.models import Run, RunEvent
    from workflows.versions import publish as versions

    procs = start_processes(
        {
            "children-scheduler": ["runscheduler", "--name", "bench-s"],
            "children-worker-1": ["rqworker", "-v", "0", "--name", "bench-w1", "default"],
            "children-worker-2": ["rqworker", "-v", "0", "--name", "bench-w2", "default"],
        },
        env,
    )

    def publish(slug: str, definition: dict[str, Any]) -> Any:
        workflow = versions.create_workflow(slug, slug)
        versions.publish_version(versions.create_version(workflow, definition))
        workflow.refresh_from_db()
        return workflow

    def finished(run_ids: list[int], timeout: float = 300) -> list[Run]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done = list(Run.objects.filter(pk__in=run_ids, finished_at__isnull=False))
            if len(done) == len(run_ids):
                return done
            time.sleep(0.01)
        raise SystemExit(f"runs did not finish within {timeout} s")

    def one_at_a_time(workflow: Any, run_input: dict[str, Any]) -> list[float]:
        took = []
        for _ in range(SAMPLES):
            run, _ = runs.start_run(workflow, run_input)
            (done,) = finished([run.pk])
            took.append((done.finished_at - done.created_at).total_seconds() * 1000)
        return took

    try:
        leaf, parent, saga = (
            publish("bench-leaf", LEAF),
            publish("bench-parent", PARENT),
            publish("bench-saga", DEMO_SAGA),
        )
        time.sleep(3)  # the processes start
        results: dict[str, Any] = {}
        for label, workflow in (("leaf_alone", leaf), ("as_child_run", parent)):
            results[f"{label}_ms"] = spread(one_at_a_time(workflow, {}))
        for label, workflow in (("leaf", leaf), ("parents", parent)):
            t0 = time.monotonic()
            ids = [runs.start_run(workflow, {"i": i})[0].pk for i in range(BURST)]
            finished(ids)
            results[f"burst_{label}_per_s"] = round(BURST / (time.monotonic() - t0), 1)
        undo = []
        for _ in range(SAMPLES // 2):
            run, _ = runs.start_run(saga, {"card": "declined"})
            finished([run.pk])
            at = dict(
                RunEvent.objects.filter(
                    run_id=run.pk, kind__in=["run.failed", "run.compensated"]
                ).values_list("kind", "at")
            )
            undo.append((at["run.compensated"] - at["run.failed"]).total_seconds() * 1000)
        results["saga_failed_to_compensated_ms"] = spread(undo)
        log(json.dumps(results))
        print(json.dumps(results, indent=2))
    finally:
        stop_processes(procs)


if __name__ == "__main__":
    main()
