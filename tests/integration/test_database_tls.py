"""DATABASE_URL's sslmode reaches libpq: the embedded server has no TLS, so `require` is refused
by the server's answer, and `disable` connects (before, the parameter was silently dropped).

The connection is made with the parameters Django's backend builds from the settings entry.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from django.db import connections

from controlplane.settings import database_from_url


def settings_entry(query: str = "") -> dict[str, Any]:
    """The test database's settings entry as DATABASE_URL with `query` (and the environment) builds it."""
    s = connections["default"].settings_dict
    return {**s, **database_from_url(f"postgres://{s['USER']}@{s['HOST']}:{s['PORT']}/{s['NAME']}?{query}")}


def connection_params(query: str = "") -> dict[str, Any]:
    """What Django's backend passes to psycopg for that entry."""
    params: dict[str, Any] = connections["default"].__class__(settings_entry(query)).get_connection_params()
    return params


def test_sslmode_require_is_honoured_against_a_server_without_tls() -> None:
    params = connection_params("sslmode=require")
    assert params["sslmode"] == "require"
    with pytest.raises(psycopg.OperationalError, match="SSL"):
        psycopg.connect(**params)


def test_sslmode_disable_connects() -> None:
    params = connection_params("sslmode=disable&application_name=tls-probe")
    with psycopg.connect(**params) as conn:
        assert conn.execute("SELECT current_setting('application_name')").fetchone() == ("tls-probe",)
