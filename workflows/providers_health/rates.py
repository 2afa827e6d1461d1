"""Requests and tokens per minute per provider, shared by every worker (Redis).

A sliding log per provider (two sorted sets scored by Redis's clock: one member per
request, and one per request carrying its tokens, with the tokens' running total beside
them), trimmed and checked by one Lua script,
so that any window of PROVIDER_RATE_WINDOW_SECONDS admits at most the per-minute limit
scaled to it: a sliding log, not fixed minutes, because a fixed window lets twice the limit
through around its edge, which is exactly what a provider answers with 429.

A call counts its worst case of tokens (the prompt's bound plus its max_tokens) when it is
admitted, and its real usage once settled. A call bigger than the whole token limit goes
when the window is empty, alone (it could never fit otherwise). Redis losing the logs
forgets the last window's calls: at worst one window admits its limit twice; nothing that
must survive lives here.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from functools import cache

from redis.commands.core import Script

from workflows.runtime import bus

from .breaker import at
from .policy import Policy, rate_window_seconds

# KEYS: requests log, tokens log, tokens total; ARGV: window_ms, request limit, token limit,
# tokens, id -> {'go'|'wait', retry_at_ms}. The total is kept beside the log (what leaves the
# window is subtracted) so that a call costs what left the window, not the whole log.
TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - window)
local used = tonumber(redis.call('GET', KEYS[3]) or '0')
for i = 1, #gone do used = used - tonumber(string.match(gone[i], ':(%d+)$')) end
if #gone > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window) end
if redis.call('ZCARD', KEYS[2]) == 0 then used = 0 end
redis.call('SET', KEYS[3], used, 'PX', window)
local rpm = tonumber(ARGV[2])
if rpm > 0 and redis.call('ZCARD', KEYS[1]) >= rpm then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {'wait', tonumber(first[2]) + window}
end
local tpm = tonumber(ARGV[3])
local tokens = tonumber(ARGV[4])
if tpm > 0 and used > 0 and used + tokens > tpm then
  -- the moment enough of the logged calls leave the window for this one to fit
  local logged = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
  local freed = 0
  for i = 1, #logged, 2 do
    freed = freed + tonumber(string.match(logged[i], ':(%d+)$'))
    if used - freed + tokens <= tpm then return {'wait', tonumber(logged[i + 1]) + window} end
  end
  return {'wait', tonumber(logged[#logged]) + window}
end
redis.call('ZADD', KEYS[1], now, ARGV[5])
redis.call('ZADD', KEYS[2], now, ARGV[5] .. ':' .. tokens)
redis.call('SET', KEYS[3], used + tokens, 'PX', window)
redis.call('PEXPIRE', KEYS[1], window)
redis.call('PEXPIRE', KEYS[2], window)
return {'go', 0}
"""

# KEYS: tokens log, tokens total; ARGV: id, worst case, real tokens: the worst case replaced
SETTLE = """
local member = ARGV[1] .. ':' .. ARGV[2]
local score = redis.call('ZSCORE', KEYS[1], member)
if not score then return 0 end
redis.call('ZREM', KEYS[1], member)
redis.call('ZADD', KEYS[1], score, ARGV[1] .. ':' .. ARGV[3])
redis.call('INCRBY', KEYS[2], tonumber(ARGV[3]) - tonumber(ARGV[2]))
return 1
"""


@dataclass(frozen=True)
class Taken:
    """A call counted in its provider's logs: settle it with its real tokens."""

    provider: str
    id: str
    tokens: int


def requests_key(provider: str) -> str:
    return f"sy:rate:{provider}:requests"


def tokens_key(provider: str) -> str:
    return f"sy:rate:{provider}:tokens"


def total_key(provider: str) -> str:
    return f"sy:rate:{provider}:total"


@cache
def scripts() -> tuple[Script, Script]:
    redis = bus.client()
    return redis.register_script(TAKE), redis.register_script(SETTLE)


def take(policy: Policy, tokens: int) -> Taken | datetime:
    """Count a call of `tokens` (worst case) against its provider's limits; return it, or
    the time the limits will admit it."""
    ident = uuid.uuid4().hex
    window_ms = int(rate_window_seconds() * 1000)
    keys = [requests_key(policy.provider), tokens_key(policy.provider), total_key(policy.provider)]
    args: list[int | str] = [
        window_ms,
        policy.per_window(policy.rpm),
        policy.per_window(policy.tpm),
        tokens,
        ident,
    ]
    verdict, retry_at = scripts()[0](keys=keys, args=args)
    if verdict == "wait":
        return at(retry_at)
    return Taken(policy.provider, ident, tokens)


def settle(taken: Taken, real_tokens: int | None) -> None:
    """Replace the call's worst case with what it used (unknown usage: the worst case stays)."""
    if real_tokens is None or real_tokens == taken.tokens:
        return
    scripts()[1](
        keys=[tokens_key(taken.provider), total_key(taken.provider)],
        args=[taken.id, taken.tokens, max(0, real_tokens)],
    )


def in_window(provider: str) -> tuple[int, int]:
    """The requests and tokens the provider's logs hold now (for its page)."""
    redis = bus.client()
    now_ms = redis.time()
    cut = now_ms[0] * 1000 + now_ms[1] // 1000 - int(rate_window_seconds() * 1000)
    requests = int(redis.zcount(requests_key(provider), cut, "+inf"))
    members: list[str] = redis.zrangebyscore(tokens_key(provider), cut, "+inf")  # type: ignore[assignment]  # sync client
    tokens = sum(int(m.rsplit(":", 1)[1]) for m in members)
    return requests, tokens
