"""Schedules end to end: real Postgres, real Redis, real RQ workers and schedulers.

Interval schedules of one or two seconds keep the tests short; the firing is the real
scheduler process's. Fire times are read back from the runs' idempotency keys
(`schedule:<id>:<nominal fire time>`).
"""

from __future__ import annotations

import os
import signal
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.integration.conftest import node, publish, wait_finished
from tests.integration.runtime import Runtime, wait_for
from workflows.core import schedules as core
from workflows.runs import actions as runs
from workflows.schedules import timetable as schedules
from workflows.store.models import Run, Schedule, Workflow

pytestmark = pytest.mark.django_db(transaction=True)

NOOP = {"nodes": [node("tick")], "edges": []}


def slow(seconds: float) -> dict[str, Any]:
    return {"nodes": [node("work", "core.delay", config={"seconds": seconds})], "edges": []}


def every(workflow: Workflow, seconds: int, **fields: Any) -> Schedule:
    return schedules.create_schedule(
        workflow, {"name": "tick", "kind": "interval", "interval_seconds": seconds, **fields}
    )


def fired(schedule: Schedule) -> dict[datetime, Run]:
    """The schedule's runs by their nominal fire time."""
    prefix = core.key_prefix(schedule.pk)
    rows = Run.objects.filter(workflow_id=schedule.workflow_id, idempotency_key__startswith=prefix)
    return {datetime.fromisoformat(r.idempotency_key.removeprefix(prefix)): r for r in rows}


def fires_between(schedule: Schedule, after: datetime, until: datetime) -> list[datetime]:
    """The nominal fire times in (after, until]."""
    schedule.refresh_from_db()
    found = []
    for fire in core.fires_after(schedules.spec_of(schedule), after):
        if fire > until:
            return found
        found.append(fire)
    return found


def wait_until(moment: datetime) -> None:
    """Let wall-clock time reach `moment` (the schedules under test fire by it)."""
    wait_for(lambda: timezone.now() >= moment, (moment - timezone.now()).total_seconds() + 5, f"{moment}")


@pytest.fixture
def two_schedulers(transactional_db: Any, redis_clean: None) -> Any:
    rt = Runtime()
    rt.worker("worker-1")
    rt.scheduler("scheduler-1")
    rt.scheduler("scheduler-2")
    rt.wait_ready()
    yield rt
    rt.stop()


def test_two_schedulers_start_exactly_one_run_per_fire_time(two_schedulers: Runtime) -> None:
    schedule = every(publish("ticker", NOOP), 1, overlap="allow")
    wait_for(lambda: len(fired(schedule)) >= 6, 30, "six fires")
    schedules.set_enabled(schedule.pk, False)
    by_fire = fired(schedule)
    times = sorted(by_fire)
    assert [(b - a).total_seconds() for a, b in zip(times, times[1:], strict=False)] == [1.0] * (
        len(times) - 1
    )
    assert Run.objects.filter(workflow=schedule.workflow).count() == len(times)  # no run outside a fire
    for run in by_fire.values():
        assert wait_finished(run).status == "succeeded"


def down_then_up(rt: Runtime, schedule: Schedule, fires: int) -> tuple[datetime, datetime]:
    """Freeze the only scheduler over `fires` fire times of a 2 s schedule; return (the last fire
    handled before, the moment it came back). It comes back 1.2 s after a fire, so the fire
    before is late past its grace (1 s) and the next is 0.8 s away: which fires were missed is
    known exactly. (A killed scheduler's replacement takes seconds to start: that would blur it.)
    """
    wait_for(lambda: fired(schedule), 30, "a first fire")
    proc = rt.procs["scheduler-1"]
    os.killpg(proc.pid, signal.SIGSTOP)
    schedule.refresh_from_db()
    last = schedule.last_fire_at
    assert last is not None
    back = last + timedelta(seconds=2 * fires + 1.2)
    wait_until(back)
    os.killpg(proc.pid, signal.SIGCONT)
    return last, back


@pytest.mark.parametrize(
    ("catchup", "bound", "expected"),
    [("none", 10, []), ("latest", 10, [-1]), ("all", 2, [-2, -1]), ("all", 10, [0, 1, 2])],
)
def test_after_three_missed_fires_the_catch_up_policy_decides_what_runs(
    runtime: Runtime, catchup: str, bound: int, expected: list[int]
) -> None:
    rt = runtime
    schedule = every(publish("nightly", NOOP), 2, overlap="allow", catchup=catchup, catchup_bound=bound)
    last, back = down_then_up(rt, schedule, fires=3)
    missed = fires_between(schedule, last, back)
    assert len(missed) == 3
    wait_for(
        lambda: (s := Schedule.objects.get(pk=schedule.pk)).last_fire_at and s.last_fire_at >= missed[-1], 20
    )
    started = sorted(f for f in fired(schedule) if last < f <= back)
    assert started == [missed[i] for i in expected]
    # and firing goes on as usual after
    following = back + timedelta(seconds=0.8)
    wait_for(lambda: following in fired(schedule), 20, "the next fire on time")


def test_a_paused_workflow_fires_nothing_and_resuming_it_fires_no_storm(runtime: Runtime) -> None:
    workflow = publish("paused", NOOP)
    schedule = every(workflow, 1, overlap="allow", catchup="latest")
    wait_for(lambda: fired(schedule), 30, "a first fire")
    runs.pause_workflow(workflow)
    paused_at = timezone.now()
    wait_until(paused_at + timedelta(seconds=4.5))
    during = [f for f in fired(schedule) if f > paused_at + timedelta(seconds=0.6)]
    assert during == []  # a probe already under way when it paused may start one more
    runs.resume_workflow(workflow)
    resumed_at = timezone.now()
    wait_for(lambda: any(f > resumed_at for f in fired(schedule)), 20, "a fire after resuming")
    caught_up = [f for f in fired(schedule) if paused_at + timedelta(seconds=0.6) < f <= resumed_at]
    assert len(caught_up) <= 1  # the latest missed fire at most, not one per second paused


# A run's created_at is its transaction's start, which may precede by a little the commit of
# the finish it waited for (the check of active runs is a later statement of that transaction).
CLOCK_SLACK = timedelta(seconds=0.1)


def overlapping(runs_: list[Run]) -> bool:
    spans = sorted((r.created_at, r.finished_at or timezone.now()) for r in runs_)
    return any(later[0] < earlier[1] - CLOCK_SLACK for earlier, later in zip(spans, spans[1:], strict=False))


def test_overlap_skip_starts_no_run_while_one_is_active(runtime: Runtime) -> None:
    schedule = every(publish("skipper", slow(2.5)), 1, overlap="skip")
    wait_for(lambda: len(fired(schedule)) >= 3, 40, "three runs")
    schedules.set_enabled(schedule.pk, False)
    by_fire = fired(schedule)
    done = [wait_finished(r) for r in by_fire.values()]
    assert not overlapping(done)
    assert all(r.status == "succeeded" for r in done)
    first, last = min(by_fire), max(by_fire)
    assert len(fires_between(schedule, first - timedelta(seconds=0.5), last)) > len(done)  # some skipped


def test_overlap_allow_runs_fires_side_by_side(runtime: Runtime) -> None:
    schedule = every(publish("allower", slow(2.5)), 1, overlap="allow")
    wait_for(lambda: len(fired(schedule)) >= 3, 40, "three runs")
    schedules.set_enabled(schedule.pk, False)
    done = [wait_finished(r) for r in fired(schedule).values()]
    assert overlapping(done)
    assert all(r.status == "succeeded" for r in done)


def test_overlap_cancel_cancels_the_active_run_for_the_new_fire(runtime: Runtime) -> None:
    schedule = every(publish("canceller", slow(5)), 1, overlap="cancel")
    wait_for(lambda: len(fired(schedule)) >= 3, 40, "three runs")
    schedules.set_enabled(schedule.pk, False)
    by_fire = fired(schedule)
    done = [wait_finished(by_fire[f]) for f in sorted(by_fire)]
    assert [r.status for r in done[:-1]] == ["cancelled"] * (len(done) - 1)
    assert done[-1].status == "succeeded"


def test_overlap_queue_starts_a_fire_when_the_active_run_ends(runtime: Runtime) -> None:
    schedule = every(publish("queuer", slow(2)), 1, overlap="queue", catchup_bound=2)
    wait_for(lambda: len(fired(schedule)) >= 3, 40, "three runs")
    schedules.set_enabled(schedule.pk, False)
    by_fire = fired(schedule)
    done = [wait_finished(by_fire[f]) for f in sorted(by_fire)]
    assert all(r.status == "succeeded" for r in done)
    assert not overlapping(done)
    first, second = done[0], done[1]
    second_fire = sorted(by_fire)[1]
    assert first.finished_at is not None and second_fire < first.finished_at  # it came while first ran
    assert second.created_at >= first.finished_at - CLOCK_SLACK  # and waited for first to end
