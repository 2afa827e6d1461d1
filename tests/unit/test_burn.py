"""The burn chart's geometry (core/burn.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from workflows.core.burn import HEIGHT, WIDTH, burn

START = datetime(2026, 11, 27, tzinfo=UTC)
END = START + timedelta(days=1)


def test_half_a_day_at_a_steady_pace_projects_twice_what_is_spent() -> None:
    spends = [(START + timedelta(hours=h), Decimal(10)) for h in (1, 6, 11)]
    chart = burn(START, END, START + timedelta(hours=12), Decimal(100), spends)
    assert chart.projected == Decimal(60)
    assert chart.over_at is None  # 60 of 100 at the end
    assert chart.amount_y == 0  # the amount is the chart's top
    first, *_, last = chart.spent_points.split(" ")
    assert first == f"0.0,{HEIGHT}.0" and last == f"{WIDTH / 2},{HEIGHT - 30 * HEIGHT / 100}"
    assert (
        chart.pace_points
        == f"{WIDTH / 2},{HEIGHT - 30 * HEIGHT / 100} {WIDTH}.0,{HEIGHT - 60 * HEIGHT / 100}"
    )


def test_a_pace_that_overruns_says_when_and_scales_the_chart_to_the_projection() -> None:
    chart = burn(
        START, END, START + timedelta(hours=6), Decimal(100), [(START + timedelta(hours=5), Decimal(50))]
    )
    assert chart.projected == Decimal(200)
    assert chart.over_at == START + timedelta(hours=12)
    assert chart.amount_y == HEIGHT / 2  # 100 of a 200 top


def test_nothing_spent_draws_a_flat_line_and_no_pace() -> None:
    chart = burn(START, END, START + timedelta(hours=3), Decimal(100), [])
    assert chart.spent_points == f"0.0,{HEIGHT}.0 {WIDTH / 8},{HEIGHT}.0"
    assert (chart.pace_points, chart.projected, chart.over_at) == ("", Decimal(0), None)
