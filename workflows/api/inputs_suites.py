"""What the API accepts for regression suites (workflows/suites/): request bodies as pydantic models."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from workflows.api.inputs import Body, Id, Moment, Number
from workflows.suites import building

Mode = Literal["live", "recorded", "recorded-then-live"]


class CaseIn(Body):
    input: dict[str, Any] = Field(description="The run input of the case.")
    name: str = Field("", max_length=200, description="Shown in reports; default `run <origin>` or `case`.")
    origin: Id | None = Field(None, description="The run the case came from: its recorded calls replay.")
    expectations: list[dict[str, Any]] = Field(
        default_factory=list,
        max_length=50,
        description="Expectations on the final output or a node's output (docs: suites): equals, path_equals, "
        "contains, schema, tolerance, judge; each may name a `node` and a JSON `path`.",
    )

    def case(self) -> building.CaseIn:
        return building.CaseIn(self.input, self.name, self.origin, list(self.expectations))


class FromRunsIn(Body):
    """Which runs become cases: picked ids, or the last N that a runs-page filter finds."""

    runs: list[Id] | None = Field(None, max_length=building.MAX_FROM_RUNS, description="Picked run ids.")
    last: int | None = Field(
        None, ge=1, le=building.MAX_FROM_RUNS, description="The last N runs (default filter: succeeded)."
    )
    status: Literal["succeeded"] = "succeeded"
    version: Number | None = Field(None, description="Only runs of this version number.")
    input: dict[str, Any] | None = Field(
        None, description="Only runs whose input contains this (JSON containment)."
    )
    created_after: Moment | None = None
    created_before: Moment | None = None


class SuiteIn(Body):
    name: str = Field(min_length=1, max_length=100)
    description: str = Field("", max_length=500)
    required_to_publish: bool = Field(
        False, description="Refuse to publish a draft unless this suite passed on it."
    )
    cases: list[CaseIn] = Field(default_factory=list, max_length=building.MAX_CASES)
    from_runs: FromRunsIn | None = Field(None, description="Cases built from runs, after `cases`.")


class SuitePatch(Body):
    required_to_publish: bool


class CasesIn(Body):
    cases: list[CaseIn] = Field(min_length=1, max_length=building.MAX_CASES)


class UploadIn(Body):
    jsonl: str = Field(
        min_length=1,
        max_length=2_000_000,
        description='JSONL: one case a line, {"input": {...}, "name"?, "origin"?, "expectations"?}; a bad line is '
        "a 422 naming its number, and nothing is added.",
    )


class SuiteRunIn(Body):
    version: Number | None = Field(
        None, description="The version number to test (a published version or a draft)."
    )
    draft: bool = Field(False, description="Test the newest draft (when no version is named); frozen first.")
    mode: Mode = Field(
        "recorded-then-live",
        description="How cases with an origin make their calls; cases without one run live.",
    )


class RecentRunsIn(Body):
    last: int = Field(
        20, ge=1, le=building.MAX_FROM_RUNS, description="How many of the latest succeeded runs."
    )
    version: Number | None = Field(
        None, description="The version number to test (default: the newest draft)."
    )
    mode: Mode = "recorded-then-live"
