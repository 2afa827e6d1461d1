"""Concurrency keys with real RQ workers and the real scheduler as processes: the limit per
key, sampled from PostgreSQL during the runs; fairness when one key holds 90 % of the runs;
a worker killed with SIGKILL while keyed attempts are in flight leaks no place."""

from __future__ import annotations

import signal
import threading
from collections import Counter

import pytest
from django.db import connection
from django.db.models import Count

from tests.integration.conftest import node, publish, wait_finished
from tests.integration.runtime import Runtime, wait_for
from workflows.runs import actions as runs
from workflows.store.models import NodeRun, Run

pytestmark = pytest.mark.django_db(transaction=True)

IN_FLIGHT = ("queued", "running", "waiting")


def keyed_delays(slug: str, seconds: float, limit: int) -> object:
    return publish(
        slug,
        {
            "nodes": [
                node(
                    "work",
                    "core.delay",
                    config={"seconds": seconds},
                    concurrency={"key": "input.customer", "limit": limit},
                )
            ]
        },
    )


class Sampler(threading.Thread):
    """Count keyed attempts in flight per key from PostgreSQL until stopped; keep the maxima."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.most: Counter[str] = Counter()
        self.samples = 0
        self.done = threading.Event()

    def run(self) -> None:
        try:
            while not self.done.is_set():
                counts = Counter(
                    dict(
                        NodeRun.objects.filter(flow_key__isnull=False, status__in=IN_FLIGHT)
                        .values_list("flow_key")
                        .annotate(n=Count("id"))
                        .values_list("flow_key", "n")
                    )
                )
                for key, count in counts.items():
                    self.most[key] = max(self.most[key], count)
                self.samples += 1
                self.done.wait(0.02)
        finally:
            connection.close()


def test_the_limit_per_key_holds_and_a_key_with_90_percent_of_the_runs_does_not_delay_the_others(
    runtime: Runtime,
) -> None:
    workflow = keyed_delays("fair", 0.2, 2)
    sampler = Sampler()
    sampler.start()
    big = [runs.start_run(workflow, {"customer": "big"})[0] for _ in range(18)]
    small = [runs.start_run(workflow, {"customer": "small"})[0] for _ in range(2)]
    finished = [wait_finished(run, 120) for run in [*big, *small]]
    sampler.done.set()
    sampler.join(10)

    assert {run.status for run in finished} == {"succeeded"}
    assert sampler.samples > 10
    assert sampler.most["work:big"] == 2, "the big key used its places and never more"
    assert sampler.most["work:small"] <= 2
    # Fair share: the small key's two runs (started last) take their own places at once, so
    # they end among the first few; first come, first served they would end after all 18.
    ends = sorted((NodeRun.objects.get(run=run).finished_at, run.pk) for run in finished)
    order = [pk for _, pk in ends]
    small_places = [order.index(run.pk) for run in small]
    assert max(small_places) < 6, f"the small key's runs ended at places {small_places} of 20"


def test_kill_9_of_a_worker_with_keyed_attempts_in_flight_leaks_no_place(runtime: Runtime) -> None:
    workflow = keyed_delays("keyed-kill", 2.0, 1)
    started = [runs.start_run(workflow, {"customer": "c"})[0] for _ in range(3)]
    running = wait_for(
        lambda: NodeRun.objects.filter(run__in=started, status="running").first(),
        30,
        "a keyed attempt to run",
    )
    runtime.kill(running.worker, signal.SIGKILL)

    finished = [wait_finished(run, 120) for run in started]

    assert [run.status for run in finished] == ["succeeded"] * 3
    assert NodeRun.objects.get(pk=running.pk).lost == 1
    assert not NodeRun.objects.filter(flow_key="work:c", status__in=IN_FLIGHT).exists()
    assert Run.objects.filter(pk__in=[r.pk for r in started], status="running").count() == 0
