"""One circuit breaker per (provider, model), shared by every worker.

State table (the Lua scripts below are the only writers of the Redis hash; times are Redis's
own clock, so every worker agrees on them):

    closed     a call goes. A fault (timeout, lost connection, 408, 429, 5xx) counts; so do
               all calls in the error-rate window. FAILURES faults in a row, or an error
               rate >= ERROR_RATE over at least MIN_CALLS calls in the window   -> open
    open       no call goes until `until`: OPEN_SECONDS, or the Retry-After of the fault
               that opened it (seconds or an HTTP date). The first call asked after `until`
               becomes the one probe                                              -> half_open
    half_open  only the probe goes; every other call waits for it (until the probe's
               deadline: the provider's timeout plus PROBE_GRACE_SECONDS, after which a
               prober that died is replaced). The probe succeeds -> closed; fails -> open.

Every decision (and every new probe lease) starts a new generation `g` of the hash; a call
carries the generation it was admitted in, and its outcome counts only in that generation.
A call admitted while closed that finishes after the breaker opened counts for nothing, and
so it does after the breaker opened and closed again: a failure met during an outage and
reported late (a slot's sync thread behind on a loaded machine) neither counts against the
recovered provider nor, in the gate, spends its attempt (the gate holds it: `STALE`).
Operators force a breaker open (for a time) or closed (workflows/providers_health/manage).

Every decision (opened, half_opened, closed, forced_open, forced_closed) is written to
PostgreSQL (BreakerDecision) after Redis took it. A missing hash (Redis restarted empty) is
rebuilt from the latest row before anything else reads it: an open breaker stays open until
its recorded `until`, a half-open one is rebuilt open with its `until` passed (the next call
probes); the error counters are not kept (they only matter for the next few seconds).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any

from redis.commands.core import Script

from workflows.runtime import bus
from workflows.store.models import BreakerDecision

from .policy import Policy

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"
OPENED, HALF_OPENED, CLOSED_AGAIN = "opened", "half_opened", "closed"
FORCED_OPEN, FORCED_CLOSED = "forced_open", "forced_closed"
STALE = "stale"  # a call's outcome reported after the breaker decided something since its admission
STATE_VALUES = {CLOSED: 0, HALF_OPEN: 1, OPEN: 2}  # the /metrics gauge
PROBE_GRACE_SECONDS = 5.0
KNOWN = "sy:breakers"  # a set of "provider/model": the breakers called since Redis started

NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

# The generation: HINCRBY on every decision and probe lease (a missing field counts as 0).
# KEYS[1] the hash; ARGV[1] the probe's lease (ms). -> {verdict, until_ms, now_ms, generation}
CHECK = (
    NOW
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {'missing', 0, now, 0} end
local s = redis.call('HGET', KEYS[1], 's')
local u = tonumber(redis.call('HGET', KEYS[1], 'u') or '0')
local g = tonumber(redis.call('HGET', KEYS[1], 'g') or '0')
if s == 'closed' then return {'go', 0, now, g} end
if s == 'open' then
  if now < u then return {'wait', u, now, g} end
  redis.call('HSET', KEYS[1], 's', 'half_open', 'p', now + tonumber(ARGV[1]))
  return {'half_opened', 0, now, redis.call('HINCRBY', KEYS[1], 'g', 1)}
end
local p = tonumber(redis.call('HGET', KEYS[1], 'p') or '0')
if p > now then return {'wait', p, now, g} end
redis.call('HSET', KEYS[1], 'p', now + tonumber(ARGV[1]))
return {'probe', 0, now, redis.call('HINCRBY', KEYS[1], 'g', 1)}
"""
)

# KEYS[1]; ARGV: ok, probe, retry_after_ms, failures, error_rate, window_ms, min_calls, open_ms,
# the call's generation -> {decision ('none', 'opened', 'closed', 'stale', 'missing'), until_ms}
REPORT = (
    NOW
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {'missing', 0} end
if tonumber(redis.call('HGET', KEYS[1], 'g') or '0') ~= tonumber(ARGV[9]) then return {'stale', 0} end
local ok = ARGV[1] == '1'
local probe = ARGV[2] == '1'
local ra = tonumber(ARGV[3])
local period = tonumber(ARGV[8])
if ra > 0 then period = ra end
local s = redis.call('HGET', KEYS[1], 's')
if s == 'half_open' then
  if not probe then return {'none', 0} end
  if ok then
    redis.call('HSET', KEYS[1], 's', 'closed', 'u', 0, 'f', 0, 'ws', now, 'wc', 0, 'we', 0, 'p', 0)
    redis.call('HINCRBY', KEYS[1], 'g', 1)
    return {'closed', 0}
  end
  redis.call('HSET', KEYS[1], 's', 'open', 'u', now + period, 'f', 0, 'p', 0)
  redis.call('HINCRBY', KEYS[1], 'g', 1)
  return {'opened', now + period}
end
if s == 'open' then return {'none', 0} end
local ws = tonumber(redis.call('HGET', KEYS[1], 'ws') or '0')
local wc = tonumber(redis.call('HGET', KEYS[1], 'wc') or '0')
local we = tonumber(redis.call('HGET', KEYS[1], 'we') or '0')
local f = tonumber(redis.call('HGET', KEYS[1], 'f') or '0')
if now - ws > tonumber(ARGV[6]) then ws = now; wc = 0; we = 0 end
wc = wc + 1
if ok then f = 0 else f = f + 1; we = we + 1 end
if (not ok) and (f >= tonumber(ARGV[4]) or (wc >= tonumber(ARGV[7]) and we / wc >= tonumber(ARGV[5]))) then
  redis.call('HSET', KEYS[1], 's', 'open', 'u', now + period, 'f', 0, 'ws', now, 'wc', 0, 'we', 0, 'p', 0)
  redis.call('HINCRBY', KEYS[1], 'g', 1)
  return {'opened', now + period}
end
redis.call('HSET', KEYS[1], 'f', f, 'ws', ws, 'wc', wc, 'we', we)
return {'none', 0}
"""
)

# KEYS[1]: a probe that will not be made gives its lease back (the next call probes)
UNPROBE = """
if redis.call('HGET', KEYS[1], 's') == 'half_open' then redis.call('HSET', KEYS[1], 'p', 0) end
return 1
"""

# KEYS[1]; ARGV: state, until_ms; ARGV[3] '1': only when the hash is missing (a rebuild)
PUT = """
if ARGV[3] == '1' and redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 's', ARGV[1], 'u', ARGV[2], 'f', 0, 'ws', 0, 'wc', 0, 'we', 0, 'p', 0)
redis.call('HINCRBY', KEYS[1], 'g', 1)
return 1
"""


@dataclass(frozen=True)
class Verdict:
    """What the breaker says to one call: go (`probe`: as the half-open breaker's one probe),
    or wait until `until`."""

    go: bool
    probe: bool = False
    until: datetime | None = None
    generation: int = 0  # the breaker's generation the call goes in (its report names it)


@dataclass(frozen=True)
class State:
    provider: str
    model: str
    state: str
    until: datetime | None
    failures: int  # faults in a row (closed)
    window_calls: int
    window_errors: int


def key(provider: str, model: str) -> str:
    return f"sy:breaker:{provider}/{model}"


def name(provider: str, model: str) -> str:
    return f"{provider}/{model}"


@cache
def scripts() -> tuple[Script, Script, Script, Script]:
    redis = bus.client()
    return (
        redis.register_script(CHECK),
        redis.register_script(REPORT),
        redis.register_script(PUT),
        redis.register_script(UNPROBE),
    )


def at(ms: int | float) -> datetime:
    return datetime.fromtimestamp(float(ms) / 1000.0, UTC)


def as_ms(when: datetime | None) -> int:
    return int(when.timestamp() * 1000) if when else 0


def check(provider: str, model: str, policy: Policy) -> Verdict:
    """Ask the breaker whether a call may go now; record the half-opening it may decide."""
    lease = int((policy.timeout_seconds + PROBE_GRACE_SECONDS) * 1000)
    verdict, until, _, generation = run(scripts()[0], provider, model, [lease])
    if verdict == HALF_OPENED:
        record(provider, model, HALF_OPENED, HALF_OPEN, None, "its open period ended: one probe call goes")
        return Verdict(True, probe=True, generation=int(generation))
    if verdict == "probe":
        return Verdict(True, probe=True, generation=int(generation))
    if verdict == "wait":
        return Verdict(False, until=at(until))
    return Verdict(True, generation=int(generation))


def give_back_probe(provider: str, model: str) -> None:
    """A probe that will not be made (its rate refused it): let the next call probe."""
    scripts()[3](keys=[key(provider, model)], args=[])


def report(
    provider: str,
    model: str,
    policy: Policy,
    ok: bool,
    verdict: Verdict,
    fault: Any = None,
) -> str:
    """Count the outcome of a call let go by `verdict` (`fault`: an admission.Fault, or None: no
    fault of the provider's); record the decision it led to and return it ("none", "opened",
    "closed", or STALE: the breaker decided something since the call went, and it counts for
    nothing)."""
    retry_ms = int(fault.retry_after * 1000) if fault is not None and fault.retry_after else 0
    args = [
        int(ok),
        int(verdict.probe),
        retry_ms,
        policy.failures,
        policy.error_rate,
        int(policy.window_seconds * 1000),
        policy.min_calls,
        int(policy.open_seconds * 1000),
        verdict.generation,
    ]
    decision, until, *_ = run(scripts()[1], provider, model, args)
    if decision == OPENED:
        why = fault.detail if fault is not None else "the probe call failed"
        record(provider, model, OPENED, OPEN, at(until), why)
    elif decision == CLOSED_AGAIN:
        record(provider, model, CLOSED_AGAIN, CLOSED, None, "the probe call succeeded")
    return str(decision)


def run(script: Script, provider: str, model: str, args: list[Any]) -> list[Any]:
    """Run a script on the breaker's hash, rebuilding it from PostgreSQL first when it is missing."""
    found = list(script(keys=[key(provider, model)], args=args))
    if found[0] == "missing":
        rebuild(provider, model)
        found = list(script(keys=[key(provider, model)], args=args))
    return found


def rebuild(provider: str, model: str) -> None:
    """Write the missing hash from the latest recorded decision (none: closed)."""
    latest = BreakerDecision.objects.filter(provider=provider, model=model).order_by("-id").first()
    state, until = CLOSED, 0
    if latest is not None and latest.state != CLOSED:
        # A half-open breaker whose probe Redis forgot: open, its period over (the next call probes).
        state, until = OPEN, as_ms(latest.until) if latest.state == OPEN else 0
    scripts()[2](keys=[key(provider, model)], args=[state, until, 1])
    bus.client().sadd(KNOWN, name(provider, model))


def force(provider: str, model: str, state: str, until: datetime | None, reason: str, actor: Any) -> None:
    """Put a breaker open until `until`, or closed, by a person's decision; record it."""
    scripts()[2](keys=[key(provider, model)], args=[state, as_ms(until), 0])
    bus.client().sadd(KNOWN, name(provider, model))
    decision = FORCED_OPEN if state == OPEN else FORCED_CLOSED
    record(provider, model, decision, state, until, reason, actor)


def record(
    provider: str,
    model: str,
    decision: str,
    state: str,
    until: datetime | None,
    reason: str,
    actor: Any = None,
) -> BreakerDecision:
    return BreakerDecision.objects.create(
        provider=provider[:60],
        model=model[:200],
        decision=decision,
        state=state,
        until=until,
        reason=reason[:2000],
        actor=person_of(actor),
    )


def person_of(actor: Any) -> Any:
    """The person behind a decision: the user, an API key's owner, or None (the system)."""
    return actor if getattr(actor, "is_authenticated", False) else getattr(actor, "owner", None)


def read(provider: str, model: str) -> State:
    """The breaker's state as it is now (rebuilt first when Redis lost it)."""
    redis = bus.client()
    fields: dict[str, str] = redis.hgetall(key(provider, model))  # type: ignore[assignment]  # sync client
    if not fields:
        rebuild(provider, model)
        fields = redis.hgetall(key(provider, model))  # type: ignore[assignment]
    state = fields.get("s", CLOSED)
    until_ms = int(fields.get("u") or 0)
    if state == HALF_OPEN:
        until_ms = int(fields.get("p") or 0)
    return State(
        provider,
        model,
        state,
        at(until_ms) if until_ms else None,
        int(fields.get("f") or 0),
        int(fields.get("wc") or 0),
        int(fields.get("we") or 0),
    )


def known() -> list[tuple[str, str]]:
    """Every breaker called since Redis started, and every one that ever decided anything."""
    members: set[str] = bus.client().smembers(KNOWN)  # type: ignore[assignment]  # the sync client's answer
    pairs = {tuple(n.split("/", 1)) for n in members}
    pairs |= set(BreakerDecision.objects.values_list("provider", "model").distinct())
    return sorted((str(p[0]), str(p[1])) for p in pairs if len(p) == 2)
