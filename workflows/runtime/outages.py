"""Waiting out a store that is away: capped backoff and log lines that say so without flooding.

Every long-running process (scheduler, broadcaster, webhook dispatcher, worker) keeps one
`Outage` per loop. When a store fails it calls `failed(exc)`, sleeps the delay it returns
(0.1 s doubling to 5 s) and tries again; nothing is lost meanwhile, Postgres being the truth.
The first failure is logged as a warning naming the store, then a reminder every 30 s with
how long it has lasted; the first success after it logs "reconnected after N s". The state
(`away`, `since`) is what the process reports in its heartbeat while Redis is up.
"""

from __future__ import annotations

import logging
import time

import redis

from workflows.store.errors import STORES_AWAY

RETRY_AFTER_SECONDS = 5  # what the API and pages ask a client to wait while a store is away
FIRST_DELAY_SECONDS = 0.1
MAX_DELAY_SECONDS = 5.0
REMIND_EVERY_SECONDS = 30.0


def store_of(exc: BaseException) -> str:
    """Name the store an error came from."""
    # A channel layer's lost connection is an OSError (the broadcaster's group sends).
    return "Redis" if isinstance(exc, redis.RedisError | OSError) else "PostgreSQL"


def unavailable(exc: BaseException) -> str:
    """What a client is told while a store is away (the error's own text can name hosts)."""
    return f"{store_of(exc)} is unavailable; nothing was changed. Try again in {RETRY_AFTER_SECONDS} s."


class Outage:
    def __init__(self, who: str, log: logging.Logger) -> None:
        self.who = who
        self.log = log
        self.since: float | None = None  # monotonic time of the first failure, while away
        self.away = ""  # the store away, while away
        self.delay = FIRST_DELAY_SECONDS
        self.reminded = 0.0

    def failed(self, exc: BaseException) -> float:
        """Record a failure; return how long to wait before trying again."""
        now = time.monotonic()
        store = store_of(exc)
        if self.since is None or store != self.away:
            self.since = self.since or now
            self.away = store
            self.reminded = now
            self.log.warning(
                "%s lost %s (%s); waiting for it, nothing is lost meanwhile", self.who, store, exc
            )
        elif now - self.reminded >= REMIND_EVERY_SECONDS:
            self.reminded = now
            self.log.warning(
                "%s still waiting for %s after %.0f s (%s)", self.who, store, now - self.since, exc
            )
        delay, self.delay = self.delay, min(self.delay * 2, MAX_DELAY_SECONDS)
        return delay

    def ok(self) -> None:
        """Record a success: the end of an outage, if there was one."""
        if self.since is not None:
            self.log.warning(
                "%s reconnected to %s after %.1f s", self.who, self.away, time.monotonic() - self.since
            )
            self.since, self.away, self.delay = None, "", FIRST_DELAY_SECONDS


__all__ = ["MAX_DELAY_SECONDS", "RETRY_AFTER_SECONDS", "STORES_AWAY", "Outage", "store_of", "unavailable"]
