"""Schedules: a workflow's runs started by the clock; managed by editors, fired by schedulers.

Firing (`fire_due`, the schedulers' housekeeping every FIRE_SECONDS): one indexed probe for
enabled schedules whose `next_fire_at` has come, of workflows that are not paused; then each
is handled in a transaction of its own that locks its row with SKIP LOCKED, so two
schedulers never compute one schedule at once, and the run of each fire carries the fire's
nominal time as its idempotency key, so even a fire computed twice (a scheduler that died
after starting the run and before its commit leaves nothing; one that committed moved
`last_fire_at` on) starts one run.

Overlap, when a fire comes while a run of the same schedule is active (running or waiting):
- skip: the fire is dropped (recorded in `last_outcome`);
- allow: the run starts beside it;
- cancel: the active runs are cancelled, then the run starts;
- queue: the fire waits in `queued_fires` (at most `catchup_bound` of them, the oldest dropped
  beyond) and the schedule is probed every QUEUE_POLL_SECONDS until the active run has ended;
  then the oldest queued fire starts (its run keyed by its own nominal time). Polling costs a
  probe per queued schedule per second and no hook in the engine's hot path; a fire waits at
  most that long after the run ends.

A paused workflow's schedules are not probed; on resume (or when a schedule is enabled again)
their catch-up policy decides what of the fires missed meanwhile runs (core/schedules.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from workflows.core import priorities, schedules as core
from workflows.core.definition import Issue
from workflows.core.states import RunStatus
from workflows.runs import actions as runs
from workflows.store import audit
from workflows.store.errors import Conflict, DomainError, Invalid, NotFound
from workflows.store.models import Run, Schedule, Workflow
from workflows.store.statements import SCHEDULES, WORKFLOWS

log = logging.getLogger(__name__)

FIRE_SECONDS = 0.5  # how often the schedulers probe (like wait deadlines: not every 0.1 s tick)
QUEUE_POLL_SECONDS = 1.0
FIRE_BATCH = 50
ACTIVE = (RunStatus.RUNNING, RunStatus.WAITING)
FIELDS = (
    "name",
    "kind",
    "cron",
    "timezone",
    "interval_seconds",
    "input",
    "priority",
    "overlap",
    "catchup",
    "catchup_bound",
    "jitter_seconds",
    "enabled",
)

# Paused workflows' schedules are left out here, so pausing a workflow pauses its schedules.
DUE_SQL = f"""
SELECT s.id FROM {SCHEDULES} s JOIN {WORKFLOWS} w ON w.id = s.workflow_id
WHERE s.enabled AND s.next_fire_at <= %(now)s AND NOT w.paused
ORDER BY s.next_fire_at LIMIT %(limit)s
"""


# --------------------------------------------------------------------------- managing


def check_fields(data: dict[str, Any]) -> None:
    """Refuse a schedule's fields that are not valid, each problem naming its field."""
    problems = [Issue(p.field, p.message, "schedule") for p in core.check_spec(spec_of_fields(data))]
    if not str(data.get("name", "")).strip():
        problems.append(Issue("name", "give the schedule a name.", "schedule"))
    for field, allowed in (("overlap", core.OVERLAPS), ("catchup", core.CATCHUPS)):
        if data.get(field) not in allowed:
            problems.append(Issue(field, f"must be one of {', '.join(allowed)}.", "schedule"))
    if not 1 <= int(data.get("catchup_bound") or 0) <= core.MAX_CATCHUP_BOUND:
        problems.append(Issue("catchup_bound", f"must be from 1 to {core.MAX_CATCHUP_BOUND}.", "schedule"))
    if not 0 <= int(data.get("jitter_seconds") or 0) <= core.MAX_JITTER_SECONDS:
        problems.append(Issue("jitter_seconds", f"must be from 0 to {core.MAX_JITTER_SECONDS}.", "schedule"))
    if data.get("priority") is not None and (problem := priorities.check_priority(data["priority"])):
        problems.append(Issue("priority", problem, "schedule"))
    if not isinstance(data.get("input"), dict):
        problems.append(Issue("input", "must be a JSON object.", "schedule"))
    else:
        try:
            runs.check_input(data["input"])
        except Invalid as exc:
            problems.append(Issue("input", exc.message, "schedule"))
    if problems:
        raise Invalid("The schedule is not valid.", problems)


def spec_of_fields(data: dict[str, Any], anchor: datetime | None = None) -> core.Spec:
    return core.Spec(
        kind=data.get("kind", core.CRON),
        cron=(data.get("cron") or "").strip(),
        timezone=(data.get("timezone") or "UTC").strip(),
        interval_seconds=int(data.get("interval_seconds") or 0),
        anchor=anchor,
    )


def spec_of(schedule: Schedule) -> core.Spec:
    return spec_of_fields({f: getattr(schedule, f) for f in FIELDS}, schedule.anchor)


def defaults() -> dict[str, Any]:
    """A new schedule's fields before the person's (the model's defaults)."""
    return {f.name: f.get_default() for f in Schedule._meta.fields if f.name in FIELDS}


def create_schedule(workflow: Workflow, data: dict[str, Any], user: Any = None) -> Schedule:
    """Add a schedule to a workflow; its first fire is the next one after now."""
    fields = {**defaults(), **data}
    check_fields(fields)
    refuse_taken_name(workflow, fields["name"])
    now = timezone.now()
    schedule = Schedule(workflow=workflow, anchor=now, created_by=user_of(user), **fields)
    with transaction.atomic():
        schedule.save()  # first: its id spreads its jitter
        set_next_fire(schedule, now, now)
        schedule.save(update_fields=["next_fire_at"])
        audit.record(user, "schedule.create", schedule, **described(schedule))
    return schedule


def update_schedule(schedule_id: int, data: dict[str, Any], user: Any = None) -> Schedule:
    """Change a schedule; its fire times count from now (nothing before the change is caught up)."""
    with transaction.atomic():
        schedule = locked(schedule_id)
        fields = {**{f: getattr(schedule, f) for f in FIELDS}, **data}
        check_fields(fields)
        if fields["name"] != schedule.name:
            refuse_taken_name(schedule.workflow, fields["name"])
        for field, value in fields.items():
            setattr(schedule, field, value)
        now = timezone.now()
        schedule.anchor, schedule.queued_fires = now, []
        set_next_fire(schedule, now, now)
        schedule.save()
        audit.record(user, "schedule.update", schedule, **described(schedule))
    return schedule


def set_enabled(schedule_id: int, enabled: bool, user: Any = None) -> Schedule:
    """Pause or resume a schedule. On resume its catch-up policy applies to the fires missed."""
    with transaction.atomic():
        schedule = locked(schedule_id)
        schedule.enabled = enabled
        if enabled:  # due now: the next probe applies the catch-up policy
            schedule.next_fire_at = timezone.now()
        schedule.save(update_fields=["enabled", "next_fire_at", "updated_at"])
        audit.record(user, "schedule.resume" if enabled else "schedule.pause", schedule)
    return schedule


def run_now(schedule_id: int, user: Any = None) -> Run:
    """Start a run of the schedule now, with its input and priority, outside its timetable.

    Its idempotency key carries the schedule's prefix (`schedule:<id>:now:<time>`), so it is
    the schedule's latest run and counts as active for its overlap policy; the timetable
    itself (next and last fire) is untouched.
    """
    schedule = get_schedule(schedule_id)
    now = timezone.now()
    with transaction.atomic():
        run, _ = runs.start_run(
            schedule.workflow,
            schedule.input,
            idempotency_key=f"{core.key_prefix(schedule.pk)}now:{iso(now)}",
            priority=schedule.priority,
        )
        audit.record(user, "schedule.run_now", schedule, run=run.pk)
    return run


def delete_schedule(schedule_id: int, user: Any = None) -> None:
    """Delete a schedule; its runs stay."""
    with transaction.atomic():
        schedule = locked(schedule_id)
        audit.record(user, "schedule.delete", schedule, name=schedule.name)
        schedule.delete()


def get_schedule(schedule_id: int) -> Schedule:
    try:
        return Schedule.objects.select_related("workflow").get(pk=schedule_id)
    except Schedule.DoesNotExist:
        raise NotFound(f"No schedule with id {schedule_id}.") from None


def locked(schedule_id: int) -> Schedule:
    try:
        return Schedule.objects.select_for_update().select_related("workflow").get(pk=schedule_id)
    except Schedule.DoesNotExist:
        raise NotFound(f"No schedule with id {schedule_id}.") from None


def refuse_taken_name(workflow: Workflow, name: str) -> None:
    if Schedule.objects.filter(workflow=workflow, name=name).exists():
        raise Conflict(f"name: workflow {workflow.slug!r} already has a schedule named {name!r}.")


def user_of(actor: Any) -> Any:
    return actor if getattr(actor, "is_authenticated", False) else getattr(actor, "owner", None)


def described(schedule: Schedule) -> dict[str, Any]:
    return {f: getattr(schedule, f) for f in FIELDS}


def upcoming(schedule: Schedule, count: int = 3) -> list[datetime]:
    """The next `count` nominal fire times after now (for the pages and the API)."""
    fires: list[datetime] = []
    after = max(timezone.now(), schedule.last_fire_at or schedule.anchor)
    for fire in core.fires_after(spec_of(schedule), after):
        if len(fires) == count:
            break
        fires.append(fire)
    return fires


def recent_runs(schedule: Schedule, count: int = 5) -> list[Run]:
    """The schedule's latest runs, newest first (found by their idempotency keys)."""
    return list(
        Run.objects.filter(
            workflow_id=schedule.workflow_id, idempotency_key__startswith=core.key_prefix(schedule.pk)
        ).order_by("-id")[:count]
    )


def overview(workflow: Workflow) -> list[dict[str, Any]]:
    """Each schedule of a workflow with its next fires and latest runs (for the pages)."""
    return [
        {"schedule": s, "upcoming": upcoming(s), "recent": recent_runs(s)} for s in workflow.schedules.all()
    ]


# --------------------------------------------------------------------------- firing


@dataclass
class Firing:
    """What handling one schedule did (for the log and the tests)."""

    started: list[int]
    outcome: str


def fire_due(now: datetime | None = None, limit: int = FIRE_BATCH) -> int:
    """Handle every due schedule; return how many runs started. The schedulers call this."""
    now = now or timezone.now()
    with connection.cursor() as cur:
        cur.execute(DUE_SQL, {"now": now, "limit": limit})
        due = [row[0] for row in cur.fetchall()]
    return sum(len(fire_safely(schedule_id, now).started) for schedule_id in due)


def fire_safely(schedule_id: int, now: datetime) -> Firing:
    """Fire one schedule; one whose stored spec no longer computes (a time zone gone from the
    system's tzdata, a row edited by hand) is paused with the reason, not left to stop the
    scheduler's loop on every probe."""
    try:
        return fire_schedule(schedule_id, now)
    except core.COMPUTE_ERRORS as exc:
        log.exception("schedule %s cannot be computed; pausing it", schedule_id)
        Schedule.objects.filter(pk=schedule_id).update(
            enabled=False, last_outcome=f"paused: its fire times cannot be computed ({exc})"[:300]
        )
        return Firing([], str(exc))


def fire_schedule(schedule_id: int, now: datetime) -> Firing:
    """Handle one schedule in a transaction that holds its row (skipped if another holds it)."""
    with transaction.atomic():
        schedule = (
            Schedule.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("workflow")
            .filter(pk=schedule_id, enabled=True, next_fire_at__lte=now, workflow__paused=False)
            .first()
        )
        if schedule is None:  # another scheduler holds it, or it was handled, paused or deleted
            return Firing([], "")
        firing = handle(schedule, now)
        if firing.outcome:
            schedule.last_outcome = firing.outcome[:300]
        schedule.save(update_fields=["next_fire_at", "last_fire_at", "queued_fires", "last_outcome"])
    if firing.started:
        log.info("schedule %s: %s", schedule_id, firing.outcome)
    return firing


def handle(schedule: Schedule, now: datetime) -> Firing:
    spec = spec_of(schedule)
    last = max(schedule.last_fire_at or schedule.anchor, schedule.anchor)  # an edit restarts the count
    fires = core.due_fires(
        spec, last, now, schedule.catchup, schedule.catchup_bound, lambda f: jitter_of(schedule, f)
    )
    started: list[int] = []
    notes: list[str] = []
    queued = [datetime.fromisoformat(f) for f in schedule.queued_fires]
    if queued and not active_runs(schedule):
        started += start_fire(schedule, queued.pop(0), notes)
    for fire in fires:
        started += overlap(schedule, fire, queued, notes)
    missed = core.latest_due(spec, last, now)
    if missed > last and not fires:
        notes.append(f"missed fires up to {iso(missed)} not run (catch-up: {schedule.catchup})")
    schedule.last_fire_at = max(missed, last)
    schedule.queued_fires = [f.astimezone(UTC).isoformat() for f in queued[-schedule.catchup_bound :]]
    set_next_fire(schedule, schedule.last_fire_at, now)
    return Firing(started, "; ".join(notes))


def overlap(schedule: Schedule, fire: datetime, queued: list[datetime], notes: list[str]) -> list[int]:
    """Apply the overlap policy to one fire; return the runs it started."""
    active = active_runs(schedule)
    if not active or schedule.overlap == core.OVERLAP_ALLOW:
        return start_fire(schedule, fire, notes)
    if schedule.overlap == core.OVERLAP_SKIP:
        notes.append(f"{iso(fire)} skipped: run {active[0]} still active")
        return []
    if schedule.overlap == core.OVERLAP_QUEUE:
        queued.append(fire)
        notes.append(f"{iso(fire)} queued behind run {active[0]}")
        return []
    for run_id in active:
        try:
            runs.cancel_run(run_id, reason=f"schedule {schedule.name!r}: overlap policy cancel")
        except Conflict:
            continue  # it ended meanwhile
    notes.append(f"cancelled run(s) {', '.join(map(str, active))}")
    return start_fire(schedule, fire, notes)


def start_fire(schedule: Schedule, fire: datetime, notes: list[str]) -> list[int]:
    """Start the run of one fire (its nominal time the idempotency key); return [its id]."""
    try:
        run, created = runs.start_run(
            schedule.workflow,
            schedule.input,
            idempotency_key=core.fire_key(schedule.pk, fire),
            priority=schedule.priority,
        )
    except DomainError as exc:  # no active version, an input the workflow refuses
        notes.append(f"{iso(fire)} not started: {exc}")
        return []
    notes.append(f"{iso(fire)} started run {run.pk}" if created else f"{iso(fire)} had run {run.pk}")
    return [run.pk] if created else []


def active_runs(schedule: Schedule) -> list[int]:
    return list(
        Run.objects.filter(
            workflow_id=schedule.workflow_id,
            idempotency_key__startswith=core.key_prefix(schedule.pk),
            status__in=ACTIVE,
        )
        .order_by("id")
        .values_list("id", flat=True)
    )


def set_next_fire(schedule: Schedule, last: datetime, now: datetime) -> None:
    """When the schedulers look next: the next nominal fire plus its jitter, or soon while
    fires are queued behind an active run."""
    fire = core.next_fire(spec_of(schedule), max(last, now))
    at = fire + jitter_of(schedule, fire)
    if schedule.queued_fires:
        at = min(at, now + timedelta(seconds=QUEUE_POLL_SECONDS))
    schedule.next_fire_at = at


def jitter_of(schedule: Schedule, fire: datetime) -> timedelta:
    return core.jitter(schedule.pk or 0, fire, schedule.jitter_seconds)


def iso(moment: datetime) -> str:
    """A fire time for a person to read (its exact value is in the run's key)."""
    return moment.astimezone(UTC).isoformat(timespec="seconds")
