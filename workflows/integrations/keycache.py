"""Verified API keys, remembered by each process while nothing about keys or people changed.

Every API request and every request to the MCP endpoint presents a key (both are let in by
api/auth.admit_token; a further check of the owner's role, `authorize_actor` or an MCP
tool's, uses the role read with the key). Reading it (a statement joining the key to its owner, and
for an owner without superuser rights one more for their groups) cost about 0.45 ms of the
web process's CPU and a PostgreSQL round trip per request, a fifth of a run start's
Python (bench/start_bench.py, 2026-11-27). A process now keeps, per key prefix, the row it
verified, its owner's role and the *epoch* it was read under, and trusts them again only when:

- the presented key hashes to the remembered hash (a wrong secret always goes to the table);
- the epoch in Redis (`EPOCH_KEY`) is still the one the row was read under. It is checked
  in the same Lua call that counts the request against its rate-limit window, so a
  remembered key costs no round trip of its own: the count happens only when the epoch
  holds (a refused key is never counted, as before), else the key is read afresh;
- it was read less than `FRESH_FOR` seconds ago.

The epoch (runtime/epochs.py's mechanism, here checked inside the rate limit's script) is replaced (a new random token, never a counter that a restarted Redis could
repeat; an absent epoch matches nothing) whenever a key, a user or a group is saved or
deleted, or a user's groups change: the signal handlers below, which every write of the
project goes through (keys.py, the admin, auth's own forms and commands). So a revocation,
a scope, expiry or role change, a deactivation takes effect on the next request of every
process: in the process that made it at once (its entries are dropped), in the others
through the epoch, which is replaced when the change is made and again after its commit
(a request that read the epoch between the two could have read the row as it was before).

What a signal cannot see (a `QuerySet.update()` of users or keys, SQL by hand), or a
change made while Redis was unreachable (the epoch could not be replaced: it is logged),
is seen within `FRESH_FOR` seconds. While Redis is unreachable nothing is trusted from
memory: every request reads its key, as before.
"""

from __future__ import annotations

import hmac
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import redis
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models.signals import m2m_changed, post_delete, post_save

from controlplane import access
from workflows.integrations import keys
from workflows.runtime import bus, epochs
from workflows.store import hotreads
from workflows.store.models import ApiKey

EPOCH_KEY = "sy:apikeys:epoch"
FRESH_FOR = 2.0  # seconds: the bound for changes no signal reports (see above)
CACHED_AT_MOST = 4096

# KEYS[1] the epoch, KEYS[2] the rate window's counter (or the epoch again: not counted);
# ARGV[1] the epoch the caller holds ('' for none), ARGV[2] the counter's TTL (0: do not
# count), ARGV[3] a fresh epoch, taken if none is set. Returns {epoch, count or -1}: the
# count only when the caller's epoch is current.
ADMIT = """
local epoch = redis.call('GET', KEYS[1])
if not epoch then
    epoch = ARGV[3]
    redis.call('SET', KEYS[1], epoch)
end
if epoch ~= ARGV[1] or ARGV[2] == '0' then
    return {epoch, -1}
end
local count = redis.call('INCR', KEYS[2])
redis.call('EXPIRE', KEYS[2], tonumber(ARGV[2]))
return {epoch, count}
"""


@dataclass
class Entry:
    row: tuple[Any, ...]  # hotreads.key_row: the key's values, then its owner's
    digest: str  # the key's hash
    role: str | None
    epoch: str
    read_at: float  # time.monotonic()
    last_used_at: datetime | None  # as this process last recorded it (keys.touch)


@dataclass(frozen=True)
class Counter:
    """The rate-limit counter a request counts against, and its TTL in seconds."""

    name: str
    ttl: int


@dataclass(frozen=True)
class Admitted:
    key: ApiKey
    role: str | None  # the owner's role (access.role_of), read with the key
    count: int | None  # the request's count in the counter's window; None: not counted yet
    redis_away: str | None = None  # why Redis could not be asked: the key was read from the table


_entries: dict[str, Entry] = {}


def admit(plaintext: str, counter: Counter | None, now: datetime) -> Admitted:
    """Return the usable key `plaintext` names, from memory while it holds (see above).

    Raise keys.KeyRefused saying why it cannot be used. With `counter`, a key taken from
    memory is also counted, in the same Redis call; otherwise `count` is None.
    """
    prefix = keys.prefix_of(plaintext)
    entry = _entries.get(prefix)
    if entry is not None and not is_fresh(entry, plaintext):
        entry = None
    try:
        epoch, count = call_admit(entry.epoch if entry else "", counter)
    except redis.RedisError as exc:  # the caller logs it (auth.py: the rate limit is not enforced)
        key = verify(plaintext, now, prefix)
        return Admitted(key, access.role_of(key.owner), None, redis_away=str(exc))
    if entry is not None and epoch == entry.epoch:
        return Admitted(remembered(entry, now), entry.role, count if count >= 0 else None)
    key = verify(plaintext, now, prefix)
    role = access.role_of(key.owner)
    remember(prefix, key, role, epoch)
    return Admitted(key, role, None)


def is_fresh(entry: Entry, plaintext: str) -> bool:
    young = time.monotonic() - entry.read_at < FRESH_FOR
    return young and hmac.compare_digest(entry.digest, keys.hash_key(plaintext))


def call_admit(held: str, counter: Counter | None) -> tuple[str, int]:
    names = [EPOCH_KEY, counter.name if counter else EPOCH_KEY]
    ttl = counter.ttl if counter and held else 0
    epoch, count = admit_script()(keys=names, args=[held, ttl, uuid.uuid4().hex])
    return str(epoch), int(count)


_script: list[Any] = []


def admit_script() -> Any:
    """The ADMIT script on this process's Redis client (a new client, say in a test, gets its own)."""
    client = bus.client()
    if not _script or _script[0].registered_client is not client:
        _script[:] = [client.register_script(ADMIT)]
    return _script[0]


def verify(plaintext: str, now: datetime, prefix: str) -> ApiKey:
    try:
        return keys.verify(plaintext, now)
    except keys.KeyRefused:
        _entries.pop(prefix, None)
        raise


def remembered(entry: Entry, now: datetime) -> ApiKey:
    """A fresh ApiKey (and owner) from the entry, checked for expiry and its use recorded."""
    key = hotreads.key_of(entry.row)
    key.last_used_at = entry.last_used_at
    keys.check_usable(key, now)
    keys.touch(key, now)
    entry.last_used_at = key.last_used_at
    return key


def remember(prefix: str, key: ApiKey, role: str | None, epoch: str) -> None:
    if len(_entries) >= CACHED_AT_MOST:
        _entries.clear()
    row = hotreads.key_row(key)
    _entries[prefix] = Entry(row, key.hash, role, epoch, time.monotonic(), key.last_used_at)


EPOCH = epochs.Epoch(EPOCH_KEY, FRESH_FOR)  # replaced and watched as runtime/epochs.py says


def forget() -> None:
    """Drop what this process remembers; other processes follow the epoch."""
    _entries.clear()


EPOCH.forgets.append(forget)


def replace_epoch() -> None:
    """Have every process read keys afresh on their next request (best effort: see above)."""
    EPOCH.replace()


def changed(sender: Any = None, update_fields: Any = None, action: str = "post", **_: Any) -> None:
    """A key, a user or a group changed: forget here, replace the epoch now and after commit."""
    if update_fields is not None and set(update_fields) <= {"last_login"}:
        return  # a sign-in, not a change of what a key may do
    if not action.startswith("post"):
        return  # m2m_changed's pre_add, pre_remove, pre_clear: the post_ one follows
    EPOCH.changed()


def watch_changes() -> None:
    """Connect `changed` to every change that decides what a key may do (workflows/apps.py)."""
    user = get_user_model()
    for model in (ApiKey, user, Group):
        post_save.connect(changed, sender=model, dispatch_uid=f"keycache-save-{model.__name__}")
        post_delete.connect(changed, sender=model, dispatch_uid=f"keycache-delete-{model.__name__}")
    m2m_changed.connect(changed, sender=user.groups.through, dispatch_uid="keycache-groups")
