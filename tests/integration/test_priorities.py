"""Priorities under a backlog: real Postgres, Redis, scheduler and RQ workers."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.conftest import node, publish, wait_finished
from tests.integration.runtime import Runtime, wait_for
from workflows.runs import actions as runs
from workflows.store.models import NodeRun, Run

pytestmark = pytest.mark.django_db(transaction=True)

BACKLOG = 300
ONE = {"nodes": [node("step")], "edges": []}
# Not batchable: one job per node, so a worker pops them one at a time.
SHORT = {"nodes": [node("step", "core.delay", config={"seconds": 0.02})], "edges": []}


@pytest.fixture
def scheduler_only(transactional_db: Any, redis_clean: None) -> Any:
    rt = Runtime()
    rt.scheduler("scheduler-1")
    rt.wait_ready()
    yield rt
    rt.stop()


def queued(run_ids: list[int]) -> bool:
    return NodeRun.objects.filter(run_id__in=run_ids, status="queued").count() == len(run_ids)


def test_a_high_priority_run_overtakes_a_backlog_of_low_ones(scheduler_only: Runtime) -> None:
    workflow = publish("batch", ONE)
    low = [runs.start_run(workflow, {"n": n}, priority=-5)[0].pk for n in range(BACKLOG)]
    wait_for(lambda: queued(low), 60, "the backlog to be queued in RQ")
    urgent, _ = runs.start_run(workflow, {"urgent": True}, priority=9)
    wait_for(lambda: queued([urgent.pk]), 30, "the urgent run to be queued")
    scheduler_only.worker("worker-1")  # one worker meets the whole queue at once
    assert wait_finished(urgent).status == "succeeded"
    started = dict(NodeRun.objects.filter(run_id__in=[*low, urgent.pk]).values_list("run_id", "started_at"))
    ahead = [run_id for run_id in low if started[run_id] and started[run_id] < started[urgent.pk]]
    assert ahead == []  # queued last, started first
    wait_for(
        lambda: Run.objects.filter(pk__in=low, status="succeeded").count() == BACKLOG, 120, "the backlog"
    )


def test_the_plain_queue_is_not_starved_by_a_stream_of_urgent_work(scheduler_only: Runtime) -> None:
    workflow = publish("mixed", SHORT)
    plain = [runs.start_run(workflow, {"n": n})[0].pk for n in range(20)]
    urgent = [runs.start_run(workflow, {"n": n}, priority=5)[0].pk for n in range(200)]
    wait_for(lambda: queued(plain + urgent), 60, "both lanes to be queued")
    scheduler_only.worker("worker-1")
    wait_for(lambda: Run.objects.filter(pk__in=plain, status="succeeded").exists(), 60, "a plain run")
    urgent_done = Run.objects.filter(pk__in=urgent, status="succeeded").count()
    assert urgent_done < len(urgent)  # a plain run got a worker before the urgent lane ran dry
