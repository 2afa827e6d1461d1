"""API keys: create (the secret is shown once), verify, revoke.

A key reads `sy_<prefix>_<secret>`. Only the prefix (to find the row) and the sha256 of the
whole key are stored; sha256 rather than a slow password hash because the secret is 256 random
bits, not something a person chose, and every API request verifies one. `last_used_at` is
written at most once a minute per key, so reads stay reads.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from controlplane import access
from workflows.store import audit, hotreads
from workflows.store.errors import Conflict, Invalid, NotFound
from workflows.store.models import ApiKey

PREFIX_BYTES = 4  # 8 hex characters
SECRET_BYTES = 32
TOUCH_EVERY = timedelta(minutes=1)


class KeyRefused(Exception):
    """The presented key cannot be used; the message says why (401 on the API)."""


def hash_key(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode()).hexdigest()


def create_key(
    owner: Any, name: str, scopes: Sequence[str], expires_at: datetime | None = None, actor: Any = None
) -> tuple[ApiKey, str]:
    """Create a key for `owner`; return it and its plaintext, which is never stored."""
    check_scopes(scopes)
    if expires_at is not None and expires_at <= timezone.now():
        raise Invalid("expires_at: the expiry must be in the future.")
    for _ in range(3):  # a prefix collision (1 in 4 billion) just draws again
        prefix = secrets.token_hex(PREFIX_BYTES)
        plaintext = f"sy_{prefix}_{secrets.token_urlsafe(SECRET_BYTES)}"
        try:
            with transaction.atomic():
                key = ApiKey.objects.create(
                    name=name,
                    owner=owner,
                    prefix=prefix,
                    hash=hash_key(plaintext),
                    scopes=sorted(set(scopes), key=access.SCOPES.index),
                    expires_at=expires_at,
                )
                audit.record(actor, "apikey.create", key, name=name, scopes=key.scopes, owner=owner.username)
            return key, plaintext
        except IntegrityError:
            continue
    raise Conflict("Could not draw a unique key prefix; try again.")


def check_scopes(scopes: Sequence[str]) -> None:
    unknown = [s for s in scopes if s not in access.SCOPES]
    if unknown or not scopes:
        raise Invalid(f"scopes: give one or more of {', '.join(access.SCOPES)}; got {list(scopes)}.")


def verify(plaintext: str, now: datetime | None = None) -> ApiKey:
    """Return the usable key matching `plaintext`, or raise KeyRefused saying why."""
    now = now or timezone.now()
    key = hotreads.find_key(prefix_of(plaintext))
    if key is None or not hmac.compare_digest(key.hash, hash_key(plaintext)):
        raise KeyRefused("Unknown API key: check it was copied whole, or ask an admin for a new one.")
    check_usable(key, now)
    touch(key, now)
    return key


def prefix_of(plaintext: str) -> str:
    """Return the prefix of a key of Switchyard's form, or raise KeyRefused."""
    parts = plaintext.split("_", 2)
    if len(parts) != 3 or parts[0] != "sy" or len(parts[1]) != 2 * PREFIX_BYTES:
        raise KeyRefused("This is not a Switchyard API key: keys look like sy_<prefix>_<secret>.")
    return parts[1]


def check_usable(key: ApiKey, now: datetime) -> None:
    if key.revoked_at is not None:
        raise KeyRefused(f"API key sy_{key.prefix} was revoked at {key.revoked_at:%Y-%m-%d %H:%M} UTC.")
    if key.expires_at is not None and key.expires_at <= now:
        raise KeyRefused(f"API key sy_{key.prefix} expired at {key.expires_at:%Y-%m-%d %H:%M} UTC.")
    if not key.owner.is_active:
        raise KeyRefused(f"The owner of API key sy_{key.prefix} is deactivated.")


def touch(key: ApiKey, now: datetime) -> None:
    """Record use, at most once per TOUCH_EVERY (a conditional update, no lock).

    The condition is the stored time, not the one `key` holds: a process that remembers a
    key (keycache.py) may hold an older one than another process wrote since.
    """
    if key.last_used_at is None or now - key.last_used_at >= TOUCH_EVERY:
        unused = Q(last_used_at__isnull=True) | Q(last_used_at__lte=now - TOUCH_EVERY)
        ApiKey.objects.filter(unused, pk=key.pk).update(last_used_at=now)
        key.last_used_at = now


def revoke_key(key_id: int, actor: Any = None) -> ApiKey:
    """Revoke a key for good; revoking twice is refused with the first time."""
    with transaction.atomic():
        key = get_key(key_id, lock=True)
        if key.revoked_at is not None:
            raise Conflict(
                f"API key sy_{key.prefix} was already revoked at {key.revoked_at:%Y-%m-%d %H:%M} UTC."
            )
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        audit.record(actor, "apikey.revoke", key)
    return key


def get_key(key_id: int, lock: bool = False) -> ApiKey:
    keys = ApiKey.objects.select_related("owner")
    try:
        return (keys.select_for_update(of=("self",)) if lock else keys).get(pk=key_id)
    except ApiKey.DoesNotExist:
        raise NotFound(f"No API key with id {key_id}.") from None


def matching_keys(text: str) -> QuerySet[ApiKey]:
    """The keys whose name, prefix or owner's username holds `text` (any case); all when it is blank."""
    text = text.strip()
    if not text:
        return ApiKey.objects.all()
    return ApiKey.objects.filter(
        Q(name__icontains=text) | Q(prefix__icontains=text) | Q(owner__username__icontains=text)
    )
