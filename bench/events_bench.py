#!/usr/bin/env python3
"""Events that start runs: `EVENTS=1000 RATE=200 .venv/bin/python bench/events_bench.py`.

Two workflows (one `core.noop` node each) subscribe to one topic; one scheduler and two RQ
workers run (real processes) against a database of its own (`switchyard_eventsbench` on the
embedded servers in .data/bench-events, or those DATABASE_URL/REDIS_URL name). It posts
EVENTS CloudEvents one request each (structured mode, through Django's test client in this
process, as an operator's session) paced at RATE a second, and prints:
- the POST's latency (the event kept and both runs created when it answers), p50/p95;
- published -> the run's node started by a worker (wall clock of this host), p50/p95;
- one batch request of 1,000 new events (2,000 runs): its time;
- the same 1,000 posted again (all duplicates, nothing started): its time.
Figures only; nothing here is asserted.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import waits_bench  # noqa: E402  (its server and database set-up, under our own names)

waits_bench.DATA = REPO / ".data" / "bench-events"
waits_bench.DB_NAME = "switchyard_eventsbench"
waits_bench.REDIS_DB = 6
EVENTS = int(os.environ.get("EVENTS") or 1000)
RATE = float(os.environ.get("RATE") or 200)
NOOP = {"nodes": [{"id": "take", "handler": "core.noop"}], "edges": []}


def event(n: int, prefix: str) -> dict[str, object]:
    return {
        "specversion": "1.0",
        "id": f"{prefix}-{n}",
        "source": "/bench",
        "type": "bench.topic",
        "data": {"n": n},
    }


def main() -> None:
    env = waits_bench.prepare()
    from django.contrib.auth.models import User
    from django.test import Client

    from workflows.events import subscriptions
    from workflows.store.models import NodeRun, Run
    from workflows.versions import publish as versions

    procs = waits_bench.start_processes(
        {
            "scheduler": ["runscheduler", "--name", "bench-s"],
            "worker-1": ["rqworker", "-v", "0", "--name", "bench-w1", "default"],
            "worker-2": ["rqworker", "-v", "0", "--name", "bench-w2", "default"],
        },
        env,
    )
    try:
        for slug in ("bench-a", "bench-b"):
            workflow = versions.create_workflow(slug, slug)
            versions.publish_version(versions.create_version(workflow, NOOP))
            workflow.refresh_from_db()
            subscriptions.subscribe(workflow, "bench.topic")
        client = Client(HTTP_HOST="localhost")
        client.force_login(User.objects.create_superuser("bench", "b@example.test", "x"))
        time.sleep(3)  # the workers' first heartbeats

        posted: dict[int, float] = {}  # run id -> when its event was posted (epoch seconds)
        latencies = []
        t0 = time.monotonic()
        for n in range(EVENTS):
            pause = t0 + n / RATE - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            at = time.time()
            started = time.perf_counter()
            answer = client.post(
                "/api/v1/events", json.dumps(event(n, "paced")), content_type="application/cloudevents+json"
            )
            latencies.append((time.perf_counter() - started) * 1000)
            assert answer.status_code == 202, answer.content
            posted.update({run: at for run in answer.json()["runs"]})
        achieved = EVENTS / (time.monotonic() - t0)
        deadline = time.monotonic() + 300
        while (
            NodeRun.objects.filter(run_id__in=posted, started_at__isnull=True).exists()
            and time.monotonic() < deadline
        ):
            time.sleep(0.5)
        starts = NodeRun.objects.filter(run_id__in=posted, started_at__isnull=False).values_list(
            "run_id", "started_at"
        )
        to_start = [(s - datetime.fromtimestamp(posted[r], UTC)).total_seconds() * 1000 for r, s in starts]

        batch = [event(n, "batch") for n in range(1000)]
        started = time.perf_counter()
        first = client.post(
            "/api/v1/events", json.dumps(batch), content_type="application/cloudevents-batch+json"
        )
        batch_ms = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        again = client.post(
            "/api/v1/events", json.dumps(batch), content_type="application/cloudevents-batch+json"
        )
        again_ms = (time.perf_counter() - started) * 1000
        assert first.status_code == again.status_code == 202
        results = {
            "events": EVENTS,
            "rate_asked": RATE,
            "rate_achieved": round(achieved, 1),
            "post_ms": waits_bench.spread(latencies),
            "published_to_node_started_ms": waits_bench.spread(to_start),
            "batch_1000_new_ms": round(batch_ms, 1),
            "batch_1000_again_ms": round(again_ms, 1),
            "runs": Run.objects.count(),
            "load_1m": round(os.getloadavg()[0], 2),
            "now": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        print(json.dumps(results, indent=2))
    finally:
        waits_bench.stop_processes(procs)


if __name__ == "__main__":
    main()
