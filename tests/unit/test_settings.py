"""Settings parsing: DATABASE_URL's libpq parameters, REDIS_URL's schemes, production's refusals.

The settings are module-level, so what happens at import is checked in a fresh interpreter
(`python -c`) with the environment under test; the parsing functions are checked directly.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from channels_redis.utils import create_pool  # type: ignore[import-untyped]  # channels-redis ships no types
from django.core.exceptions import ImproperlyConfigured

from controlplane.settings import (
    DEV_SECRET_KEY,
    checked_redis_url,
    database_from_url,
    production_problems,
)

ROOT = Path(__file__).resolve().parents[2]
GOOD_KEY = secrets.token_urlsafe(50)
PRODUCTION = {
    "SWITCHYARD_ENV": "production",
    "SECRET_KEY": GOOD_KEY,
    "ALLOWED_HOSTS": "switchyard.example.com",
    "SWITCHYARD_METRICS_TOKEN": "scrape-me",
    "SWITCHYARD_SECRETS_KEY": "a-fernet-key",
}


def settings_in(env: dict[str, str], expression: str) -> subprocess.CompletedProcess[str]:
    """Import the settings in a fresh interpreter with only `env` set; print `expression` as JSON."""
    code = f"import json, controlplane.settings as s; print(json.dumps({expression}))"
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={"PATH": os.environ["PATH"], **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_sslmode_and_sslrootcert_reach_the_connection() -> None:
    db = database_from_url(
        "postgres://app:p%40ss@db.internal:6432/sy?sslmode=verify-full&sslrootcert=/etc/ssl/pg-ca.pem"
    )
    assert db["OPTIONS"]["sslmode"] == "verify-full"  # type: ignore[index]
    assert db["OPTIONS"]["sslrootcert"] == "/etc/ssl/pg-ca.pem"  # type: ignore[index]
    assert (db["USER"], db["PASSWORD"], db["HOST"], db["PORT"], db["NAME"]) == (
        "app",
        "p@ss",
        "db.internal",
        "6432",
        "sy",
    )


def test_a_url_without_parameters_keeps_the_defaults() -> None:
    options = database_from_url("postgres://switchyard@127.0.0.1:5432/switchyard")["OPTIONS"]
    assert options == {
        "connect_timeout": 5,
        "server_side_binding": True,
        "prepare_threshold": 5,
        "options": "-c idle_in_transaction_session_timeout=60000",
    }


def test_the_idle_transaction_limit_goes_before_the_urls_own_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DB_IDLE_IN_TRANSACTION_SECONDS", "7")
    options = database_from_url("postgres://u@h/db?options=-c%20search_path%3Dsy")["OPTIONS"]
    assert options["options"] == "-c idle_in_transaction_session_timeout=7000 -c search_path=sy"  # type: ignore[index]


def test_no_idle_transaction_limit_leaves_the_urls_options_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DB_IDLE_IN_TRANSACTION_SECONDS", "0")  # a pooler that refuses startup options
    assert "options" not in database_from_url("postgres://u@h/db")["OPTIONS"]
    options = database_from_url("postgres://u@h/db?options=-c%20search_path%3Dsy")["OPTIONS"]
    assert options["options"] == "-c search_path=sy"  # type: ignore[index]


def test_a_negative_idle_transaction_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DB_IDLE_IN_TRANSACTION_SECONDS", "-5")
    with pytest.raises(ImproperlyConfigured, match="DB_IDLE_IN_TRANSACTION_SECONDS must be 0"):
        database_from_url("postgres://u@h/db")


def test_a_url_parameter_overrides_a_default() -> None:
    options = database_from_url("postgresql://u@h/db?connect_timeout=20&application_name=web")["OPTIONS"]
    assert options["connect_timeout"] == "20" and options["application_name"] == "web"  # type: ignore[index]


def test_db_pool_size_gives_the_connections_a_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DB_POOL_SIZE", "6")
    db = database_from_url("postgres://u@h/db")
    assert db["OPTIONS"]["pool"] == {"min_size": 2, "max_size": 6, "timeout": 10}  # type: ignore[index]
    assert (
        db["CONN_MAX_AGE"] == 0 and db["CONN_HEALTH_CHECKS"] is True
    )  # the pool needs the one, checks by the other


def test_a_negative_db_pool_size_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DB_POOL_SIZE", "-1")
    with pytest.raises(ImproperlyConfigured, match="DB_POOL_SIZE must be 0"):
        database_from_url("postgres://u@h/db")


def test_a_database_url_of_another_scheme_is_refused() -> None:
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL must be a postgres://"):
        database_from_url("mysql://u@h/db")


def test_rediss_gives_tls_connections_to_redis_py_and_channels_redis() -> None:
    url = checked_redis_url(
        "rediss://:pw@cache.internal:6380/0?ssl_cert_reqs=required&ssl_ca_certs=/etc/ssl/ca.pem"
    )
    pool = redis.ConnectionPool.from_url(url)
    assert pool.connection_class is redis.SSLConnection
    assert pool.connection_kwargs["ssl_ca_certs"] == "/etc/ssl/ca.pem"
    layer_pool = create_pool({"address": url, "socket_timeout": 15})
    assert layer_pool.connection_class.__name__ == "SSLConnection"


def test_a_redis_url_of_another_scheme_is_refused() -> None:
    with pytest.raises(ImproperlyConfigured, match="rediss://"):
        checked_redis_url("http://cache:6379/0")


def test_production_names_everything_missing() -> None:
    problems = production_problems({"DEBUG": "true"}, DEV_SECRET_KEY)
    assert [p.split(" ")[0] for p in problems] == [
        "SECRET_KEY",
        "ALLOWED_HOSTS",
        "SWITCHYARD_METRICS_TOKEN",
        "SWITCHYARD_SECRETS_KEY",
        "DEBUG",
    ]


def test_production_refuses_the_development_secret_key() -> None:
    problems = production_problems({**PRODUCTION, "SECRET_KEY": DEV_SECRET_KEY}, DEV_SECRET_KEY)
    assert problems == ["SECRET_KEY is the development key or too weak (50+ random characters)"]


def test_production_with_everything_set_has_no_problems() -> None:
    assert production_problems(PRODUCTION, DEV_SECRET_KEY) == []


def test_production_refuses_to_start_naming_what_is_missing() -> None:
    result = settings_in({"SWITCHYARD_ENV": "production", "ALLOWED_HOSTS": "sy.example.com"}, "s.DEBUG")
    assert result.returncode != 0
    assert "refuses to start: SECRET_KEY is not set; SWITCHYARD_METRICS_TOKEN is not set" in result.stderr
    assert "SWITCHYARD_SECRETS_KEY is not set" in result.stderr
    assert "ALLOWED_HOSTS" not in result.stderr.splitlines()[-1]


def test_production_turns_on_secure_cookies_hsts_and_the_proxy_header() -> None:
    expression = (
        "[s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SESSION_COOKIE_HTTPONLY, s.CSRF_COOKIE_HTTPONLY,"
        " s.SECURE_HSTS_SECONDS, list(s.SECURE_PROXY_SSL_HEADER), s.SECURE_SSL_REDIRECT, s.ALLOWED_HOSTS]"
    )
    result = settings_in(PRODUCTION, expression)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [
        True, True, True, True, 31536000, ["HTTP_X_FORWARDED_PROTO", "https"], True, ["switchyard.example.com"]
    ]  # fmt: skip


def test_production_passes_check_deploy() -> None:
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env={"PATH": os.environ["PATH"], **PRODUCTION},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_an_unknown_environment_is_refused() -> None:
    result = settings_in({"SWITCHYARD_ENV": "prod"}, "s.DEBUG")
    assert "SWITCHYARD_ENV must be development or production, got 'prod'" in result.stderr
