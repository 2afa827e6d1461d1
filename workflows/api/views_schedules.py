"""Schedules: a workflow's runs started by the clock (workflows/schedules/timetable.py).

Reading needs the viewer role (`read` scope); creating, changing, pausing and deleting the
editor role (`edit` scope). A cron expression or time zone that does not parse is refused
with 422, the error naming the field and quoting the parser.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from django.http import HttpRequest, HttpResponse
from ninja import Path, Router, Status
from pydantic import Field
from typing_extensions import TypedDict

from workflows.api import inputs as i, serializers as s
from workflows.api.auth import ApiRequest, allowed
from workflows.api.parsing import MAX_ID
from workflows.api.schema import refuses
from workflows.core import priorities, schedules as core
from workflows.schedules import timetable as schedules
from workflows.store.models import Schedule
from workflows.versions import publish as versions

router = Router(tags=["schedules"])
SlugPath = Annotated[str, Path(pattern=i.SLUG_PATTERN)]
ScheduleId = Annotated[int, Path(ge=1, le=MAX_ID)]
MANAGE = allowed("manage_schedules")
OPERATE = allowed("operate_schedules")  # pause and resume: operators, as for a workflow
API = "/api/v1"


class ScheduleChange(i.Body):
    """A schedule's fields; on a change, only those sent are changed."""

    name: str | None = Field(None, min_length=1, max_length=100)
    kind: Literal["cron", "interval"] | None = None
    cron: str | None = Field(None, max_length=200, description="Five cron fields, e.g. `0 9 * * 1-5`.")
    timezone: str | None = Field(None, max_length=64, description="IANA time zone the cron is read in.")
    interval_seconds: int | None = Field(None, ge=core.MIN_INTERVAL_SECONDS, le=10**9)
    input: dict[str, Any] | None = Field(None, description="The input of each run, a JSON object.")
    priority: int | None = Field(None, ge=priorities.LOWEST, le=priorities.HIGHEST)
    overlap: Literal["skip", "allow", "cancel", "queue"] | None = None
    catchup: Literal["none", "latest", "all"] | None = None
    catchup_bound: int | None = Field(None, ge=1, le=core.MAX_CATCHUP_BOUND)
    jitter_seconds: int | None = Field(None, ge=0, le=core.MAX_JITTER_SECONDS)
    enabled: bool | None = None


class ScheduleCreate(ScheduleChange):
    name: str = Field(min_length=1, max_length=100)


class ScheduleOut(TypedDict):
    id: int
    workflow: str
    name: str
    kind: str
    cron: str
    timezone: str
    interval_seconds: int | None
    input: dict[str, Any]
    priority: int | None
    overlap: str
    catchup: str
    catchup_bound: int
    jitter_seconds: int
    enabled: bool
    next_fire_at: datetime | None
    last_fire_at: datetime | None
    upcoming: list[datetime]
    queued_fires: list[str]
    last_outcome: str
    recent_runs: list[s.RunSummary]
    url: str


class ScheduleList(TypedDict):
    items: list[ScheduleOut]


def schedule_out(schedule: Schedule) -> ScheduleOut:
    recent = schedules.recent_runs(schedule)
    for run in recent:
        run.workflow = schedule.workflow
    return {
        "id": schedule.pk,
        "workflow": schedule.workflow.slug,
        **{f: getattr(schedule, f) for f in schedules.FIELDS},  # type: ignore[typeddict-item]  # the FIELDS names are ScheduleOut keys; mypy cannot see through getattr
        "next_fire_at": schedule.next_fire_at,
        "last_fire_at": schedule.last_fire_at,
        "upcoming": schedules.upcoming(schedule),
        "queued_fires": schedule.queued_fires,
        "last_outcome": schedule.last_outcome,
        "recent_runs": [s.run_summary(r) for r in recent],
        "url": f"{API}/schedules/{schedule.pk}",
    }


def sent(body: ScheduleChange) -> dict[str, Any]:
    return body.model_dump(exclude_unset=True)


@router.get(
    "/workflows/{slug:slug}/schedules", response=ScheduleList, auth=allowed("view"), summary="List schedules"
)
@refuses(404)
def list_schedules(request: HttpRequest, slug: SlugPath) -> Any:
    """List a workflow's schedules with their next fire times and latest runs."""
    workflow = versions.get_workflow(slug)
    return {"items": [schedule_out(x) for x in workflow.schedules.select_related("workflow")]}


@router.post(
    "/workflows/{slug:slug}/schedules",
    response={201: ScheduleOut},
    auth=MANAGE,
    summary="Create a schedule",
)
@refuses(404, 409)
def create_schedule(request: ApiRequest, response: HttpResponse, slug: SlugPath, body: ScheduleCreate) -> Any:
    """Create a schedule: a cron expression in a time zone, or a fixed interval."""
    schedule = schedules.create_schedule(versions.get_workflow(slug), sent(body), user=request.auth)
    data = schedule_out(schedule)
    response["Location"] = data["url"]
    return Status(201, data)


@router.get(
    "/schedules/{id:schedule_id}", response=ScheduleOut, auth=allowed("view"), summary="Read a schedule"
)
@refuses(404)
def get_schedule(request: HttpRequest, schedule_id: ScheduleId) -> Any:
    """Read a schedule with its next fire times and latest runs."""
    return schedule_out(schedules.get_schedule(schedule_id))


@router.patch("/schedules/{id:schedule_id}", response=ScheduleOut, auth=MANAGE, summary="Change a schedule")
@refuses(404, 409)
def update_schedule(request: ApiRequest, schedule_id: ScheduleId, body: ScheduleChange) -> Any:
    """Change the fields sent; fire times count from now (nothing before is caught up)."""
    return schedule_out(schedules.update_schedule(schedule_id, sent(body), user=request.auth))


@router.post(
    "/schedules/{id:schedule_id}/pause", response=ScheduleOut, auth=OPERATE, summary="Pause a schedule"
)
@refuses(404)
def pause_schedule(request: ApiRequest, schedule_id: ScheduleId) -> Any:
    """Stop firing until resumed."""
    return schedule_out(schedules.set_enabled(schedule_id, False, user=request.auth))


@router.post(
    "/schedules/{id:schedule_id}/resume", response=ScheduleOut, auth=OPERATE, summary="Resume a schedule"
)
@refuses(404)
def resume_schedule(request: ApiRequest, schedule_id: ScheduleId) -> Any:
    """Fire again; the catch-up policy decides what of the fires missed meanwhile runs."""
    return schedule_out(schedules.set_enabled(schedule_id, True, user=request.auth))


@router.post(
    "/schedules/{id:schedule_id}/run",
    response={201: s.RunSummary},
    auth=allowed("start_run"),
    summary="Run a schedule now",
)
@refuses(404, 409)
def run_schedule_now(request: ApiRequest, response: HttpResponse, schedule_id: ScheduleId) -> Any:
    """Start a run of the schedule now, with its input and priority; its timetable is
    unchanged. The run counts as the schedule's (its latest run, active for its overlap
    policy); a second call in the same second answers the same run."""
    run = schedules.run_now(schedule_id, user=request.auth)
    data = s.run_summary(run)
    response["Location"] = data["url"]
    return Status(201, data)


@router.delete("/schedules/{id:schedule_id}", response={204: None}, auth=MANAGE, summary="Delete a schedule")
@refuses(404)
def delete_schedule(request: ApiRequest, schedule_id: ScheduleId) -> Any:
    """Delete a schedule; its runs stay."""
    schedules.delete_schedule(schedule_id, user=request.auth)
    return Status(204, None)
