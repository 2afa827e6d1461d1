"""Every Redis name the runtime uses, and the few calls that touch them (RQ aside).

Nothing here is the only copy of anything: the completion stream is a wake-up call for the
schedulers ("run R changed, look at it"), heartbeats are liveness hints, and pub/sub carries
announcements. The reconciler rebuilds what a lost message would have triggered from Postgres.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, cast

import redis
from django.conf import settings
from redis.typing import EncodableT, FieldT

NOTICES = "sy:notices"  # stream: run ids whose state changed and needs a decision
GROUP = "schedulers"
NOTICES_MAXLEN = 200_000
RUNS_CHANNEL = "sy:runs"  # pub/sub: runs that finished
VERSIONS_CHANNEL = "sy:versions"  # pub/sub: versions published or activated
ROWS_AT_MOST = 64  # a run's node rows travel in a notice only for graphs up to this size
RECONCILER_LOCK = "sy:reconciler"
CANCEL_PREFIX = "sy:cancel:"  # key per cancelled run, read by workers running its nodes
WORKERS_ROSTER = "sy:workers"  # sorted set: worker name -> time of its last beat


def worker_key(name: str) -> str:
    return f"sy:worker:{name}"


def drain_key(name: str) -> str:
    """Present while a worker is asked to drain: finish its job, take no new one (worker.py)."""
    return f"sy:drain:{name}"


def rate_key(workflow_id: int, node_id: str) -> str:
    """Sorted set of a rate-limited node's recent starts (capacity.py): member -> time."""
    return f"sy:rate:{workflow_id}:{node_id}"


def scheduler_key(name: str) -> str:
    return f"sy:scheduler:{name}"


# client() decodes replies (decode_responses=True), which redis-py's types do not follow (they say
# bytes | str): readers cast replies to these. xadd takes a dict (invariant) of StreamFields.
StreamEntry = tuple[str, dict[str, str]]
StreamReply = list[tuple[str, list[StreamEntry]]]  # XREAD's and XREADGROUP's: (stream, entries)
StreamFields = dict[FieldT, EncodableT]


@cache
def client() -> redis.Redis:
    """Return this process's Redis client (thread-safe connection pool)."""
    return redis.Redis.from_url(settings.REDIS_URL, decode_responses=True, health_check_interval=30)


@dataclass(frozen=True)
class Notice:
    """A stream entry: runs that changed, and the node rows of those whose state it carries.

    `rows` are shaped like advancing.SNAPSHOT_SQL's; a run's rows travel only when the
    writer saw nothing else of that run in flight (see advancing.load_snapshots).
    """

    msg_id: str
    run_ids: list[int]
    rows: list[list[Any]] = field(default_factory=list)


def notify(run_ids: Iterable[int], rows: Sequence[Sequence[Any]] = ()) -> None:
    """Tell the schedulers these runs changed: one stream entry listing them all."""
    runs = ",".join(str(run_id) for run_id in sorted(set(run_ids)))
    if runs:
        fields: StreamFields = {"runs": runs, "rows": json.dumps(rows)} if rows else {"runs": runs}
        client().xadd(NOTICES, fields, maxlen=NOTICES_MAXLEN, approximate=True)


def parse_notices(messages: Iterable[StreamEntry], with_rows: bool = True) -> list[Notice]:
    """The notices of these stream entries; entries trimmed away have no fields."""
    return [
        Notice(
            msg_id,
            [int(r) for r in fields["runs"].split(",")],
            json.loads(fields["rows"]) if with_rows and "rows" in fields else [],
        )
        for msg_id, fields in messages
        if fields
    ]


def ensure_group() -> None:
    """Create the schedulers' consumer group (and the stream) unless it exists."""
    try:
        client().xgroup_create(NOTICES, GROUP, id="0", mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


def read_notices(consumer: str, count: int, block_ms: int) -> list[Notice]:
    """Read new notices for this consumer; recreate the group if Redis lost it."""
    try:
        reply = client().xreadgroup(GROUP, consumer, {NOTICES: ">"}, count=count, block=block_ms)
    except redis.ResponseError as exc:
        if "NOGROUP" not in str(exc):
            raise
        ensure_group()
        return []
    read = cast(StreamReply, reply or [])
    return [notice for _, messages in read for notice in parse_notices(messages)]


def claim_abandoned(consumer: str, idle_ms: int, count: int = 500) -> list[Notice]:
    """Take over notices another scheduler read but never acknowledged (it died).

    Their node rows are dropped: they may be old, so the runs are read again.
    """
    try:
        reply = client().xautoclaim(NOTICES, GROUP, consumer, idle_ms, "0-0", count=count)
        _, messages, _ = cast(tuple[str, list[StreamEntry], list[str]], reply)
    except redis.ResponseError:
        return []
    return parse_notices(messages, with_rows=False)


def ack(msg_ids: list[str]) -> None:
    if msg_ids:
        pipe = client().pipeline(transaction=False)
        pipe.xack(NOTICES, GROUP, *msg_ids)
        pipe.xdel(NOTICES, *msg_ids)
        pipe.execute()


def scoped(channel: str) -> str:
    """Name a pub/sub channel for this Redis database (database 0 keeps the bare name).

    Pub/sub is server-wide, not per database: two installations on one Redis server, each in
    a database of its own (or two pytest-xdist workers), would otherwise hear each other's
    announcements, and a scheduler would try to load a version its PostgreSQL never had.
    """
    db = int(client().connection_pool.connection_kwargs.get("db") or 0)
    return channel if db == 0 else f"{channel}@{db}"


def publish(channel: str, payload: dict[str, Any]) -> None:
    client().publish(scoped(channel), json.dumps(payload))


def publish_runs_finished(finished: Sequence[tuple[int, str]]) -> None:
    if finished:
        pipe = client().pipeline(transaction=False)
        channel = scoped(RUNS_CHANNEL)
        for run_id, status in finished:
            pipe.publish(channel, json.dumps({"run": run_id, "status": status}))
        pipe.execute()


def heartbeat(key: str, ttl: float, fields: dict[str, Any] | None = None) -> None:
    """Mark a process alive for `ttl` seconds."""
    value = json.dumps(fields or {})
    client().set(key, value, px=int(ttl * 1000))


def alive(keys: list[str]) -> list[bool]:
    """Return, for each key, whether it still exists."""
    pipe = client().pipeline(transaction=False)
    for key in keys:
        pipe.exists(key)
    return [bool(n) for n in pipe.execute()] if keys else []


def beat_worker(name: str, ttl: float, fields: dict[str, Any]) -> None:
    """Mark a worker alive: its own key (with details) and its score in the roster."""
    pipe = client().pipeline(transaction=False)
    pipe.set(worker_key(name), json.dumps(fields), px=int(ttl * 1000))
    pipe.zadd(WORKERS_ROSTER, {name: time.time()})
    pipe.execute()


def forget_worker(name: str) -> None:
    pipe = client().pipeline(transaction=False)
    pipe.delete(worker_key(name))
    pipe.zrem(WORKERS_ROSTER, name)
    pipe.execute()


def live_workers(ttl: float) -> list[str]:
    """Return the workers that beat within `ttl` seconds (no keyspace scan)."""
    roster = client()
    roster.zremrangebyscore(WORKERS_ROSTER, "-inf", time.time() - 3600)
    return cast(list[str], roster.zrangebyscore(WORKERS_ROSTER, time.time() - ttl, "+inf"))


def mark_cancelled(run_id: int, ttl_seconds: int = 3600) -> None:
    client().set(f"{CANCEL_PREFIX}{run_id}", "1", ex=ttl_seconds)


def is_cancelled(run_id: int) -> bool:
    return bool(client().exists(f"{CANCEL_PREFIX}{run_id}"))
