"""When a schedule fires, and which missed fires run after downtime (pure; time is a parameter).

A schedule is a cron expression read in an IANA time zone (cronsim: five fields, DST rules
as cron has them) or a fixed interval from an anchor. Its fire times are nominal: the run's
idempotency key is built from the nominal time, so however many schedulers compute it, one
run starts per fire time. Jitter delays when a fire is started, never its nominal time, by a
fixed amount per (schedule, fire time) that every scheduler computes alike.

Catch-up, when a probe finds fires that are due:
- none: the latest due fire starts if it is on time (within `grace` of now); the others
  were missed and are dropped;
- latest: the latest due fire starts, however late;
- all: every due fire starts, oldest first, up to `bound` (the most recent ones).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from cronsim import CronSim, CronSimError

CRON = "cron"
INTERVAL = "interval"

OVERLAP_SKIP = "skip"
OVERLAP_ALLOW = "allow"
OVERLAP_CANCEL = "cancel"
OVERLAP_QUEUE = "queue"
OVERLAPS = (OVERLAP_SKIP, OVERLAP_ALLOW, OVERLAP_CANCEL, OVERLAP_QUEUE)

CATCHUP_NONE = "none"
CATCHUP_LATEST = "latest"
CATCHUP_ALL = "all"
CATCHUPS = (CATCHUP_NONE, CATCHUP_LATEST, CATCHUP_ALL)

MIN_INTERVAL_SECONDS = 1
MAX_JITTER_SECONDS = 3600
MAX_CATCHUP_BOUND = 100
# What computing a stored spec may raise when it no longer holds (a zone gone from tzdata).
COMPUTE_ERRORS = (CronSimError, ValueError, KeyError)
GRACE_SECONDS = 60.0  # a fire later than this (or half its period) is missed, not on time


@dataclass(frozen=True)
class Spec:
    """What a schedule's fire times are computed from."""

    kind: str
    cron: str = ""
    timezone: str = "UTC"
    interval_seconds: int = 0
    anchor: datetime | None = None  # intervals count from here


@dataclass(frozen=True)
class Problem:
    field: str
    message: str


def check_spec(spec: Spec) -> list[Problem]:
    """Return what is wrong with a spec, each naming its field (cronsim's parse error shown)."""
    if spec.kind == INTERVAL:
        if spec.interval_seconds < MIN_INTERVAL_SECONDS:
            return [Problem("interval_seconds", f"must be at least {MIN_INTERVAL_SECONDS} second.")]
        return []
    if spec.kind != CRON:
        return [Problem("kind", f"must be {CRON!r} or {INTERVAL!r}, not {spec.kind!r}.")]
    problems = []
    zone = zone_of(spec.timezone)
    if zone is None:
        problems.append(
            Problem("timezone", f"{spec.timezone!r} is not an IANA time zone (e.g. 'Europe/Berlin', 'UTC').")
        )
    try:
        CronSim(spec.cron, datetime.now(zone or ZoneInfo("UTC")))
    except CronSimError as exc:
        problems.append(Problem("cron", f"{spec.cron!r} is not a cron expression: {exc}."))
    return problems


def zone_of(name: str) -> ZoneInfo | None:
    if not name or name not in available_zones():
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


_zones: set[str] = set()


def available_zones() -> set[str]:
    if not _zones:
        _zones.update(available_timezones())
    return _zones


def fires_after(spec: Spec, after: datetime) -> Iterator[datetime]:
    """The nominal fire times strictly after `after` (an aware datetime), ascending."""
    if spec.kind == INTERVAL:
        step = timedelta(seconds=spec.interval_seconds)
        anchor = spec.anchor or after
        fire = anchor + step * (int((after - anchor) / step) + 1) if after >= anchor else anchor
        while True:
            yield fire
            fire += step
    zone = ZoneInfo(spec.timezone)
    yield from CronSim(spec.cron, after.astimezone(zone))


def fires_before(spec: Spec, at: datetime) -> Iterator[datetime]:
    """The nominal fire times at or before `at`, descending."""
    if spec.kind == INTERVAL:
        step = timedelta(seconds=spec.interval_seconds)
        anchor = spec.anchor or at
        if at < anchor:
            return
        fire = anchor + step * int((at - anchor) / step)
        while fire >= anchor:
            yield fire
            fire -= step
        return
    zone = ZoneInfo(spec.timezone)
    local = at.astimezone(zone)
    if is_fire(spec, local):
        yield local
    yield from CronSim(spec.cron, local, reverse=True)


def is_fire(spec: Spec, at: datetime) -> bool:
    return at.second == 0 and at.microsecond == 0 and next(fires_after(spec, at - timedelta(seconds=1))) == at


def next_fire(spec: Spec, after: datetime) -> datetime:
    return next(fires_after(spec, after))


def due_fires(
    spec: Spec,
    last: datetime,
    now: datetime,
    catchup: str,
    bound: int,
    delay: Callable[[datetime], timedelta] = lambda fire: timedelta(0),
) -> list[datetime]:
    """The fires after `last` and at or before `now` to start now, oldest first (see the module
    doc); `delay` is each fire's jitter, which does not make it late."""
    keep = bound if catchup == CATCHUP_ALL else 1
    due: list[datetime] = []
    for fire in fires_before(spec, now):
        if fire <= last or len(due) == keep:
            break
        due.append(fire)
    due.reverse()
    if (
        catchup == CATCHUP_NONE
        and due
        and (now - due[-1] - delay(due[-1])).total_seconds() > grace(spec, due[-1])
    ):
        return []
    return due


def latest_due(spec: Spec, last: datetime, now: datetime) -> datetime:
    """The latest fire at or before `now` (or `last` when none came after it)."""
    fire = next(fires_before(spec, now), None)
    return fire if fire is not None and fire > last else last


def grace(spec: Spec, fire: datetime) -> float:
    """How late a fire may start and still be on time: GRACE_SECONDS, at most half its period."""
    period = (next_fire(spec, fire) - fire).total_seconds()
    return min(GRACE_SECONDS, period / 2)


def jitter(schedule_id: int, fire: datetime, jitter_seconds: int) -> timedelta:
    """The delay of this fire's start: the same in every scheduler, spread over [0, jitter)."""
    if jitter_seconds <= 0:
        return timedelta(0)
    digest = hashlib.sha256(f"{schedule_id}:{fire.isoformat()}".encode()).digest()
    return timedelta(milliseconds=int.from_bytes(digest[:8], "big") % (jitter_seconds * 1000))


def fire_key(schedule_id: int, fire: datetime) -> str:
    """The idempotency key of the run of one fire: one run per (schedule, nominal fire time)."""
    return f"schedule:{schedule_id}:{fire.astimezone(ZoneInfo('UTC')).isoformat()}"


def key_prefix(schedule_id: int) -> str:
    return f"schedule:{schedule_id}:"
