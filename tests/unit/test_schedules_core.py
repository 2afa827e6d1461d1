"""Fire times, catch-up, jitter and spec checks of schedules (pure, no Django)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from workflows.core import priorities, schedules as core

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
EVERY_2S = core.Spec(core.INTERVAL, interval_seconds=2, anchor=T0)


def test_a_cron_fires_at_local_time_across_a_daylight_saving_change() -> None:
    spec = core.Spec(core.CRON, "0 9 * * *", "Europe/Berlin")
    fires = core.fires_after(spec, datetime(2026, 3, 27, 12, tzinfo=UTC))
    first, second = next(fires), next(fires)
    assert [f.astimezone(ZoneInfo("Europe/Berlin")).hour for f in (first, second)] == [9, 9]
    assert second.astimezone(UTC) - first.astimezone(UTC) == timedelta(
        hours=23
    )  # the night the clocks go forward


@pytest.mark.parametrize(
    ("catchup", "bound", "expected"),
    [("none", 5, []), ("latest", 5, [8]), ("all", 2, [6, 8]), ("all", 10, [2, 4, 6, 8])],
)
def test_missed_fires_run_as_the_catch_up_policy_says(catchup: str, bound: int, expected: list[int]) -> None:
    now = T0 + timedelta(seconds=9.5)  # fires at 2, 4, 6, 8 were missed; 8 is 1.5 s late (grace 1 s)
    due = core.due_fires(EVERY_2S, T0, now, catchup, bound)
    assert due == [T0 + timedelta(seconds=s) for s in expected]


def test_an_on_time_fire_runs_under_every_catch_up_policy() -> None:
    now = T0 + timedelta(seconds=2.3)
    for catchup in core.CATCHUPS:
        assert core.due_fires(EVERY_2S, T0, now, catchup, 5) == [T0 + timedelta(seconds=2)]


def test_jitter_does_not_make_a_fire_late() -> None:
    now = T0 + timedelta(seconds=3.5)  # 1.5 s after the fire, 1.4 s of it jitter
    due = core.due_fires(EVERY_2S, T0, now, core.CATCHUP_NONE, 5, lambda fire: timedelta(seconds=1.4))
    assert due == [T0 + timedelta(seconds=2)]


def test_jitter_is_the_same_for_every_scheduler_and_within_its_bound() -> None:
    delays = [core.jitter(7, T0 + timedelta(minutes=m), 30) for m in range(50)]
    assert delays == [core.jitter(7, T0 + timedelta(minutes=m), 30) for m in range(50)]
    assert all(timedelta(0) <= d < timedelta(seconds=30) for d in delays) and len(set(delays)) > 1


def test_a_bad_cron_and_time_zone_are_named_with_the_parse_error() -> None:
    problems = core.check_spec(core.Spec(core.CRON, "*/0 * * * *", "Moon/Base"))
    assert [p.field for p in problems] == ["timezone", "cron"]
    assert "Moon/Base" in problems[0].message and "not a cron expression" in problems[1].message


def test_an_interval_under_a_second_is_refused() -> None:
    assert [p.field for p in core.check_spec(core.Spec(core.INTERVAL, interval_seconds=0))] == [
        "interval_seconds"
    ]


def test_the_fire_key_is_the_nominal_time_in_utc() -> None:
    local = datetime(2026, 1, 1, 13, 0, tzinfo=ZoneInfo("Europe/Berlin"))
    assert core.fire_key(3, local) == "schedule:3:2026-01-01T12:00:00+00:00"


def test_urgent_runs_go_to_the_urgent_lane_which_workers_take_first() -> None:
    assert priorities.lane("agents", 1) == "agents-urgent" and priorities.lane("agents", 0) == "agents"
    assert priorities.lanes(["default", "agents"]) == ["default-urgent", "agents-urgent", "default", "agents"]


def test_aging_lets_a_long_held_low_priority_overtake_a_fresh_high_one() -> None:
    assert priorities.effective(-5, 0) < priorities.effective(5, 0)
    assert priorities.effective(-5, 11 * priorities.AGING_SECONDS) > priorities.effective(5, 0)


@pytest.mark.parametrize("value", [101, -101, "5", True, 1.5])
def test_a_priority_out_of_range_or_not_an_integer_is_refused(value: object) -> None:
    assert priorities.check_priority(value) is not None
