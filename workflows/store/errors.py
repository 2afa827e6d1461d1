"""Errors the domain raises for a person to act on (surfaces map them to 4xx answers), and
the errors of stores that are away."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis
from django.db import InterfaceError, InternalError, OperationalError

# Redis or Postgres unreachable: what a long-running process (scheduler, broadcaster, webhook
# sender) waits out and tries again, rather than exit; Postgres is the truth, nothing is lost.
# InternalError too: a session PostgreSQL ended because it idled in a transaction (the
# process was cut off mid-transaction: DB_IDLE_IN_TRANSACTION_SECONDS) raises it (SQLSTATE
# 25P03) at its next statement, and a scheduler that met it exited.
STORES_AWAY = (redis.ConnectionError, redis.TimeoutError, OperationalError, InterfaceError, InternalError)
ENDED_IDLE_IN_TRANSACTION = "25P03"


def connection_lost(exc: BaseException) -> bool:
    """Whether a PostgreSQL error is its connection's end (a restart, a cut), not the statement's.

    Connection-level failures carry no SQLSTATE (the socket closed), class 08 (connection
    exception), 57P0x (the server shutting down or terminating the backend) or 25P03 (the
    backend ended for idling in a transaction). A deadlock (40P01) or a statement timeout
    (57014) is the statement's and is not counted here.
    """
    if isinstance(exc, InterfaceError):
        return True
    sqlstate = getattr(exc.__cause__, "sqlstate", None)
    if isinstance(exc, InternalError):
        return sqlstate == ENDED_IDLE_IN_TRANSACTION
    if not isinstance(exc, OperationalError):
        return False
    return sqlstate is None or sqlstate.startswith(("08", "57P0"))


class DomainError(Exception):
    """A refusal with a message that says what was wrong and what to do."""

    http_status = 400

    def __init__(self, message: str, issues: Sequence[Any] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.issues = list(issues)

    def __str__(self) -> str:
        if not self.issues:
            return self.message
        details = "; ".join(f"{i.path or '(document)'}: {i.message}" for i in self.issues)
        return f"{self.message} {details}"


class Invalid(DomainError):
    http_status = 422


class Forbidden(DomainError):
    """The person may not do this here (a check beyond their role, e.g. an approval's deciders)."""

    http_status = 403


class NotFound(DomainError):
    http_status = 404


class Conflict(DomainError):
    http_status = 409
