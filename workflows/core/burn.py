"""A budget window's burn chart, as geometry: what was spent by when, the budget's line, and
where the window ends at the pace so far. Pure: the domain gives the settled spends
(workflows/budgets/manage.burn), the page draws the result as an SVG.

x runs over the window (start to end), y from 0 to the larger of the amount and what the
pace projects, so the amount's line and the projection are both in view.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

WIDTH, HEIGHT = 320, 90


@dataclass(frozen=True)
class Burn:
    spent_points: str  # the SVG polyline's points: cumulative spend, a step at each settlement
    pace_points: str  # from now to the window's end, at the average pace so far ("" if none)
    amount_y: float  # the budget's amount line
    projected: Decimal  # spent at the window's end at this pace
    over_at: datetime | None  # when the pace reaches the amount, if within the window
    width: int = WIDTH
    height: int = HEIGHT


def burn(
    start: datetime,
    end: datetime,
    now: datetime,
    amount: Decimal,
    spends: Sequence[tuple[datetime, Decimal]],
) -> Burn:
    """The chart of a window [start, end) at `now`, from its settled `spends` (at, amount), in time order."""
    span = (end - start).total_seconds()
    elapsed = min(max((now - start).total_seconds(), 0.0), span)
    spent = sum((s for _, s in spends), Decimal(0))
    rate = spent / Decimal(elapsed) if elapsed > 0 else Decimal(0)  # per second
    projected = spent + rate * Decimal(span - elapsed)
    top = max(amount, projected, spent, Decimal("1e-9"))

    def x(seconds: float) -> float:
        return round(WIDTH * seconds / span, 1)

    def y(value: Decimal) -> float:
        return round(HEIGHT - float(value / top) * HEIGHT, 1)

    points, total = [(0.0, y(Decimal(0)))], Decimal(0)
    for at, value in spends:
        seconds = min(max((at - start).total_seconds(), 0.0), elapsed)
        points.append((x(seconds), y(total)))
        total += value
        points.append((x(seconds), y(total)))
    points.append((x(elapsed), y(total)))
    pace = f"{x(elapsed)},{y(spent)} {x(span)},{y(projected)}" if rate > 0 and elapsed < span else ""
    over_at = None
    if rate > 0 and spent < amount <= projected:
        over_at = start + (end - start) * float((amount / rate) / Decimal(span))
    return Burn(" ".join(f"{a},{b}" for a, b in points), pace, y(amount), projected, over_at)
