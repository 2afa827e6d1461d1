"""A session that idles inside a transaction is ended by PostgreSQL, and its locks with it.

That is what a process cut off from PostgreSQL mid-transaction looks like from the server: a
connection still open, a transaction still holding its locks, no next statement. Before
DB_IDLE_IN_TRANSACTION_SECONDS, a scheduler partitioned inside the webhook scan kept the
scan's cursor row locked, and every other scheduler's loop waited on it (a cross-host CI run:
no attempt of the far host was failed as lost within 60 s). The connections are made with the
parameters Django's backend builds from the settings entry.
"""

from __future__ import annotations

import time

import psycopg
import pytest
from django.db import connections

from tests.integration.test_database_tls import connection_params, settings_entry
from workflows.store.errors import STORES_AWAY, connection_lost

LOCK = "SELECT pg_advisory_xact_lock(771401)"


def test_a_transaction_left_idle_is_ended_and_its_lock_freed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DB_IDLE_IN_TRANSACTION_SECONDS", "1")
    params = connection_params()
    with psycopg.connect(**params) as holder, psycopg.connect(**params) as waiter:
        assert holder.execute("SHOW idle_in_transaction_session_timeout").fetchone() == ("1s",)
        holder.execute(LOCK)  # psycopg opened a transaction; the holder now goes quiet
        waiter.execute("SET statement_timeout = '30s'")  # fail, not hang, if nothing ends it
        began = time.monotonic()
        waiter.execute(LOCK)  # blocks until PostgreSQL ends the holder's session
        waited = time.monotonic() - began
        assert 0.5 < waited < 30, waited
        with pytest.raises(psycopg.errors.IdleInTransactionSessionTimeout):
            holder.execute("SELECT 1")


def test_a_transaction_at_work_is_not_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DB_IDLE_IN_TRANSACTION_SECONDS", "1")
    with psycopg.connect(**connection_params()) as conn:
        conn.execute(LOCK)
        for _ in range(6):  # 1.5 s in the transaction, never 1 s idle
            conn.execute("SELECT pg_sleep(0.25)")
        assert conn.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.django_db
def test_the_ended_session_is_a_store_away_to_the_loops(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through Django's connection, as a scheduler meets it when its link comes back: the
    error (InternalError, SQLSTATE 25P03) is one every long-running loop waits out and a
    worker's store tries again after (a scheduler exited on it), and the connection is then
    replaced, not reused."""
    monkeypatch.setenv("DB_IDLE_IN_TRANSACTION_SECONDS", "1")
    holder = connections["default"].__class__(settings_entry(), alias="idle-probe")
    try:
        holder.set_autocommit(False)
        with holder.cursor() as cur:
            cur.execute(LOCK)
        with psycopg.connect(**connection_params()) as waiter:
            waiter.execute("SET statement_timeout = '30s'")
            waiter.execute(LOCK)  # returns once PostgreSQL has ended the holder's session
        with pytest.raises(STORES_AWAY) as raised, holder.cursor() as cur:
            cur.execute("SELECT 1")
        assert connection_lost(raised.value), raised.value
        assert not holder.is_usable()
    finally:
        holder.close()
