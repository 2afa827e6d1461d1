"""API authentication, permission and rate limiting, in that order.

Two ways in, tried in this order, each a django-ninja security class (and a security
scheme of the OpenAPI document):
- `apiKey`: `Authorization: Bearer sy_<prefix>_<secret>` names an API key
  (workflows/integrations/keys.py). A request that sends an Authorization header is judged by it alone:
  a bad key is a 401, never a fall-back to the session.
- `session`: the browser's Django session (the editor and other pages). The person acts
  with their role; CSRF is checked on unsafe methods (a 403), as Django checks forms.
Neither: 401 with a Bearer challenge.

The permission decision is controlplane/access.py's: for a key `api_key_can` (its scopes
and its owner's role), for a person `can` (their role), as for pages. What the views get
as `request.auth` is the actor the domain records: the ApiKey or the User. The rate limit is a fixed one-minute window per key in Redis (one INCR and
one EXPIRE, pipelined; for a key the process remembers, in the Lua call that checks it is
still good: workflows/integrations/keycache.py); a key over it gets 429 with Retry-After
until the window ends. If Redis cannot be reached the limit is not enforced: the API stays
up, and the log says so.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import redis
from django.conf import settings
from django.contrib.auth.models import User
from django.http import HttpRequest
from django.utils import timezone
from ninja.errors import AuthenticationError
from ninja.security.base import AuthBase
from ninja.utils import check_csrf

from controlplane import access
from workflows.api.errors import ApiError, FieldError
from workflows.integrations import keycache, keys
from workflows.runtime import bus
from workflows.store.models import ApiKey

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


class ApiRequest(HttpRequest):
    """The request an API operation gets, for mypy: django-ninja sets `auth` to what the
    security class that let it in returned, the ApiKey (KeyAuth) or the signed-in User
    (SessionAuth). At run time it is Django's own HttpRequest (ninja ignores the annotation)."""

    auth: ApiKey | User


class KeyAuth(AuthBase):
    """The API key in `Authorization: Bearer`, allowed `action` (a key of access.ACTIONS)."""

    scheme_name = "apiKey"
    openapi_type = "http"
    openapi_scheme = "bearer"
    openapi_bearerFormat = "sy_<prefix>_<secret>"

    def __init__(self, action: str) -> None:
        self.action = action
        super().__init__()

    def __call__(self, request: HttpRequest) -> ApiKey | None:
        if "Authorization" not in request.headers:
            return None  # perhaps a browser session: the next scheme decides
        admitted, rate = admit_counted(request)
        request.rate = rate  # type: ignore[attr-defined]  # the rate state rides on the request to the response headers (AuthBase takes a plain HttpRequest)
        request.key_role = admitted.role  # type: ignore[attr-defined]  # as above, for authorize_actor
        authorize_key(admitted.key, admitted.role, self.action)
        return admitted.key


class SessionAuth(AuthBase):
    """A signed-in person, by the Django session cookie, allowed `action` by their role."""

    scheme_name = "session"
    openapi_type = "apiKey"
    openapi_in = "cookie"

    def __init__(self, action: str) -> None:
        self.action = action
        self.openapi_name = settings.SESSION_COOKIE_NAME
        super().__init__()

    def __call__(self, request: HttpRequest) -> Any:
        user = request.user
        if not user.is_authenticated:
            return None
        # Counted before the CSRF check, so its 403 says the window like every other answer to
        # a known caller. A forged cross-site request cannot spend the window: the session
        # cookie is SameSite=Lax, so it arrives without it, anonymous (401, not counted).
        request.rate = check_rate(f"user:{user.pk}")  # type: ignore[attr-defined]  # as above
        if check_csrf(request) is not None:  # lets safe methods through, as Django's middleware does
            detail = "CSRF check failed: send the csrftoken cookie's value in the X-CSRFToken header."
            raise ApiError(403, detail, [FieldError("header", "X-CSRFToken", "is missing or wrong")])
        authorize_person(user, self.action)
        return user


def allowed(action: str) -> list[AuthBase]:
    """Return the ways into an operation that needs `action`: an API key, else a session."""
    return [KeyAuth(action), SessionAuth(action)]


def refuse_anonymous(request: HttpRequest, exc: AuthenticationError) -> ApiError:
    return unauthorized("Send an API key: Authorization: Bearer sy_<prefix>_<secret>.")


def person_of(actor: Any) -> Any:
    """Return the person acting: the user of a session, the owner of a key."""
    return actor.owner if isinstance(actor, ApiKey) else actor


def authenticate(request: HttpRequest) -> ApiKey:
    """Return the API key the request presents; 401 when there is none or it cannot be used."""
    try:
        return keys.verify(bearer_token(request))
    except keys.KeyRefused as exc:
        raise unauthorized(str(exc)) from None


def bearer_token(request: HttpRequest) -> str:
    """Return the token of the request's `Authorization: Bearer`; 401 without one."""
    return token_of(request.headers.get("Authorization", ""))


def token_of(header: str) -> str:
    """Return the token of an `Authorization` header's value (Bearer scheme); 401 without one."""
    if not header:
        raise unauthorized("Send an API key: Authorization: Bearer sy_<prefix>_<secret>.")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise unauthorized("Use the Bearer scheme: Authorization: Bearer sy_<prefix>_<secret>.")
    return token.strip()


def admit_counted(request: HttpRequest) -> tuple[keycache.Admitted, RateState | None]:
    """Return the request's usable key (401 if none) and its count in the key's window (429 past it)."""
    return admit_token(bearer_token(request))


def admit_token(token: str) -> tuple[keycache.Admitted, RateState | None]:
    """Return the usable key `token` names (401 if none) and its count in the key's window (429 past it).

    The one admission of a key, for the API and the MCP endpoint alike. A key this process
    remembers is checked and counted in one Redis call (keycache.py); one it reads from the
    table is counted after: a refused key is never counted.
    """
    limit = settings.SWITCHYARD["API_RATE_LIMIT_PER_MINUTE"]
    now = time.time()
    try:
        bucket = f"key:{keys.prefix_of(token)}"
        counter = keycache.Counter(window_name(bucket, now), 2 * WINDOW_SECONDS) if limit > 0 else None
        admitted = keycache.admit(token, counter, timezone.now())
    except keys.KeyRefused as exc:
        raise unauthorized(str(exc)) from None
    if admitted.redis_away is not None:
        log.warning("rate limit not enforced, Redis unavailable: %s", admitted.redis_away)
        return admitted, None
    if counter is None:
        return admitted, None
    if admitted.count is None:
        return admitted, check_rate(bucket, now)
    return admitted, rate_state(admitted.count, limit, now)


def unauthorized(detail: str) -> ApiError:
    return ApiError(401, detail, [FieldError("header", "Authorization", detail)], CHALLENGE)


def authorize(key: ApiKey, action: str) -> None:
    """Refuse (403) an action the key's scopes or its owner's role do not allow."""
    authorize_key(key, access.role_of(key.owner), action)


def authorize_key(key: ApiKey, owner_role: str | None, action: str) -> None:
    """`authorize`, the owner's role (access.role_of) being known: read with the key."""
    if access.key_can(key.scopes, action) and access.role_can(owner_role, action):
        return
    role, scope = access.ACTIONS[action]
    if not access.key_can(key.scopes, action):
        detail = (
            f"This key's scopes ({', '.join(key.scopes)}) do not allow this: it needs the '{scope}' scope."
        )
    else:
        detail = f"The key's owner {key.owner.username!r} is not allowed this: it needs the {role} role."
    raise ApiError(403, detail)


def authorize_actor(request: ApiRequest, action: str) -> None:
    """Refuse (403) a further action an operation needs only for some of its inputs; a key's
    owner's role is the one read when the key was let in (KeyAuth)."""
    actor = request.auth
    if isinstance(actor, ApiKey):
        role = request.key_role if hasattr(request, "key_role") else access.role_of(actor.owner)
        authorize_key(actor, role, action)
    else:
        authorize_person(actor, action)


def authorize_person(user: Any, action: str) -> None:
    """Refuse (403) an action the person's role does not allow."""
    if not access.can(user, action):
        role = access.ACTIONS[action][0]
        raise ApiError(403, f"{user.username!r} is not allowed this: it needs the {role} role.")


def check_rate(bucket: str, now: float | None = None) -> RateState | None:
    """Count one request against `bucket`'s window; raise 429 past the limit."""
    limit = settings.SWITCHYARD["API_RATE_LIMIT_PER_MINUTE"]
    if limit <= 0:
        return None
    now = time.time() if now is None else now
    name = window_name(bucket, now)
    try:
        pipe = bus.client().pipeline(transaction=False)
        pipe.incr(name)
        pipe.expire(name, 2 * WINDOW_SECONDS)
        count = int(pipe.execute()[0])
    except redis.RedisError as exc:
        log.warning("rate limit not enforced, Redis unavailable: %s", exc)
        return None
    return rate_state(count, limit, now)


def window_name(bucket: str, now: float) -> str:
    """The counter of `bucket`'s window at `now`."""
    return f"sy:rate:{bucket}:{int(now // WINDOW_SECONDS)}"


def rate_state(count: int, limit: int, now: float) -> RateState:
    """The state after a request counted `count`-th in its window; 429 past the limit."""
    state = RateState(limit, limit - count, WINDOW_SECONDS - int(now % WINDOW_SECONDS))
    if count > limit:
        detail = f"Rate limit of {limit} requests per minute reached; retry in {state.reset} s."
        raise ApiError(429, detail, headers={"Retry-After": str(state.reset), **state.headers()})
    return state
