"""Time limits nest: a tool's limit inside its node's attempt (runtime/limits.py)."""

from __future__ import annotations

import time

import pytest

from workflows.runtime.limits import NodeTimeout, ToolTimeout, time_limit


def spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_an_inner_limit_fires_first_and_the_outer_one_still_applies_after_it() -> None:
    with pytest.raises(NodeTimeout), time_limit(0.4):
        with pytest.raises(ToolTimeout), time_limit(0.05, ToolTimeout):
            spin(1)
        spin(1)  # the node's limit, re-armed for what is left of it, ends this


def test_an_inner_limit_longer_than_what_is_left_of_the_outer_one_leaves_it_alone() -> None:
    with pytest.raises(NodeTimeout), time_limit(0.05), time_limit(5, ToolTimeout):
        spin(1)


def test_a_finished_inner_limit_leaves_no_alarm_behind() -> None:
    with time_limit(0.5, ToolTimeout):
        pass
    spin(0.6)
