"""API authentication, permission and rate limiting, in that order.

`Authorization: Bearer sy_<prefix>_<secret>` names an API key (workflows/keys.py). The
permission decision is controlplane/access.py's (`api_key_can`): the key's scopes and its
owner's role. The rate limit is a fixed one-minute window per key in Redis (one INCR and
one EXPIRE, pipelined); a key over it gets 429 with Retry-After until the window ends. If
Redis cannot be reached the limit is not enforced: the API stays up, and the log says so.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import redis
from django.conf import settings
from django.http import HttpRequest

from controlplane import access
from workflows import keys
from workflows.api.errors import ApiError, FieldError
from workflows.models import ApiKey
from workflows.runtime import bus

log = logging.getLogger(__name__)

WINDOW_SECONDS = 60
CHALLENGE = {"WWW-Authenticate": 'Bearer realm="switchyard"'}


@dataclass(frozen=True)
class RateState:
    limit: int
    remaining: int
    reset: int

    def headers(self) -> dict[str, str]:
        return {
            "RateLimit-Limit": str(self.limit),
            "RateLimit-Remaining": str(max(0, self.remaining)),
            "RateLimit-Reset": str(self.reset),
        }


def authenticate(request: HttpRequest) -> ApiKey:
    """Return the API key the request presents; 401 when there is none or it cannot be used."""
    header = request.headers.get("Authorization", "")
    if not header:
        raise unauthorized("Send an API key: Authorization: Bearer sy_<prefix>_<secret>.")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise unauthorized("Use the Bearer scheme: Authorization: Bearer sy_<prefix>_<secret>.")
    try:
        return keys.verify(token.strip())
    except keys.KeyRefused as exc:
        raise unauthorized(str(exc)) from None


def unauthorized(detail: str) -> ApiError:
    return ApiError(401, detail, [FieldError("header", "Authorization", detail)], CHALLENGE)


def authorize(key: ApiKey, action: str) -> None:
    """Refuse (403) an action the key's scopes or its owner's role do not allow."""
    if access.api_key_can(key, action):
        return
    role, scope = access.ACTIONS[action]
    if not access.key_can(key.scopes, action):
        detail = (
            f"This key's scopes ({', '.join(key.scopes)}) do not allow this: it needs the '{scope}' scope."
        )
    else:
        detail = f"The key's owner {key.owner.username!r} is not allowed this: it needs the {role} role."
    raise ApiError(403, detail)


def check_rate(bucket: str, now: float | None = None) -> RateState | None:
    """Count one request against `bucket`'s window; raise 429 past the limit."""
    limit = settings.SWITCHYARD["API_RATE_LIMIT_PER_MINUTE"]
    if limit <= 0:
        return None
    now = time.time() if now is None else now
    window = int(now // WINDOW_SECONDS)
    name = f"sy:rate:{bucket}:{window}"
    try:
        pipe = bus.client().pipeline(transaction=False)
        pipe.incr(name)
        pipe.expire(name, 2 * WINDOW_SECONDS)
        count = int(pipe.execute()[0])
    except redis.RedisError as exc:
        log.warning("rate limit not enforced, Redis unavailable: %s", exc)
        return None
    state = RateState(limit, limit - count, WINDOW_SECONDS - int(now % WINDOW_SECONDS))
    if count > limit:
        detail = f"Rate limit of {limit} requests per minute reached; retry in {state.reset} s."
        raise ApiError(429, detail, headers={"Retry-After": str(state.reset), **state.headers()})
    return state
