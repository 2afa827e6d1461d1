"""Rows a process remembers while nothing about them changed: a Redis epoch per kind of row.

The mechanism the API keys' memory started (integrations/keycache.py), in one place for every
kind of row read on a hot path and rarely written (the keys, the LLM price table, the spend
budgets). An `Epoch` is a Redis key holding a random token, replaced (never counted up: a
restarted Redis could repeat a counter; an absent epoch matches nothing) whenever a watched
model is saved or deleted, by Django's signals, which every write of the project goes
through, and again after the transaction commits (a reader that read the epoch between the
two could have read the rows as they were before). A process remembers what it read under
the epoch it read *first*, and trusts it again only while the epoch is the same and the
entry is younger than `fresh_for` seconds:

- a change made by any process counts within SAME_EPOCH_SECONDS (50 ms) in every process: a
  process reads an epoch at most once in that time (one Redis GET, against a PostgreSQL
  round trip and the ORM's rows), as if each read had begun up to 50 ms earlier; a change
  made in this process counts here from the next read;
- what no signal sees (`QuerySet.update()`, SQL by hand, a change while Redis was
  unreachable: logged) counts within `fresh_for` seconds;
- while Redis is unreachable nothing is trusted from memory (past the epoch's last 50 ms):
  every read goes to the table.

`Remembered` holds the values of one kind, per key, at most `at_most` of them (all dropped
when full: the bound on memory).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import redis
from django.db import connection, models, transaction
from django.db.models.signals import post_delete, post_save

from workflows.runtime import bus

log = logging.getLogger(__name__)

T = TypeVar("T")


# How long a process trusts the epoch it read (see the module). A fleet of agents read the
# prices', budgets' and providers' epochs 7 times a run, a GET each, on the threads that
# write the slots' steps: 5 % of a worker's CPU, and a queue behind them (bench/agent_fleet_bench.py).
SAME_EPOCH_SECONDS = 0.05


class Epoch:
    """One Redis epoch: read it, replace it, and replace it when a watched model changes."""

    def __init__(self, key: str, fresh_for: float) -> None:
        self.key = key
        self.fresh_for = fresh_for
        self.forgets: list[Callable[[], None]] = []  # this process's memories under the epoch
        self.seen: tuple[str, float] | None = None  # the epoch last read, and when (time.monotonic())

    def current(self) -> str:
        """The epoch now (set when absent), read at most once in SAME_EPOCH_SECONDS; raise
        redis.RedisError when Redis cannot say."""
        seen = self.seen
        if seen is not None and time.monotonic() - seen[1] < SAME_EPOCH_SECONDS:
            return seen[0]
        client = bus.client()
        epoch = client.get(self.key)
        if epoch is None:
            client.set(self.key, uuid.uuid4().hex, nx=True)
            epoch = client.get(self.key)
        self.seen = (str(epoch), time.monotonic())
        return str(epoch)

    def replace(self) -> None:
        """Have every process read afresh on its next read (best effort: see the module)."""
        self.seen = None
        try:
            bus.client().set(self.key, uuid.uuid4().hex)
        except redis.RedisError as exc:
            log.warning(
                "change not announced on %s, Redis unavailable (other processes see it within %s s): %s",
                self.key,
                self.fresh_for,
                exc,
            )

    def forget(self) -> None:
        """Drop what this process remembers under the epoch; other processes follow the epoch."""
        self.seen = None
        for forget in self.forgets:
            forget()

    def changed(self) -> None:
        """A watched row changed: forget here, replace the epoch now and after commit."""
        self.forget()
        self.replace()
        if connection.in_atomic_block:
            transaction.on_commit(self.replace)
            transaction.on_commit(self.forget)

    def on_signal(self, sender: Any = None, **_: Any) -> None:
        """`changed`, as a post_save/post_delete receiver."""
        self.changed()

    def watch(self, watched: Iterable[type[models.Model]], uid: str) -> None:
        """Call `changed` whenever one of `watched` is saved or deleted (at app start)."""
        for model in watched:
            name = model.__name__
            post_save.connect(self.on_signal, sender=model, dispatch_uid=f"{uid}-save-{name}", weak=False)
            post_delete.connect(self.on_signal, sender=model, dispatch_uid=f"{uid}-delete-{name}", weak=False)


@dataclass
class Entry(Generic[T]):
    value: T
    epoch: str
    read_at: float  # time.monotonic()


class Remembered(Generic[T]):
    """Values read by `load(key)`, remembered per key under an `Epoch` (see the module)."""

    def __init__(self, epoch: Epoch, load: Callable[[Any], T], at_most: int = 1024) -> None:
        self.epoch = epoch
        self.load = load
        self.at_most = at_most
        self.entries: dict[Hashable, Entry[T]] = {}
        epoch.forgets.append(self.entries.clear)

    def get(self, key: Hashable) -> T:
        """The value for `key`: remembered while the epoch holds, else read (and remembered)."""
        try:
            epoch = self.epoch.current()
        except redis.RedisError:
            return self.load(key)
        entry = self.entries.get(key)
        if (
            entry is not None
            and entry.epoch == epoch
            and time.monotonic() - entry.read_at < self.epoch.fresh_for
        ):
            return entry.value
        value = self.load(key)  # read after the epoch: a change committed meanwhile replaces it
        if len(self.entries) >= self.at_most:
            self.entries.clear()
        self.entries[key] = Entry(value, epoch, time.monotonic())
        return value
