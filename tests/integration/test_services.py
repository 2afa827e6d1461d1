"""The embedded servers: the session's own answer, and a separate pair keeps its data across restarts."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import psycopg
import pytest
import redis

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def services() -> ModuleType:
    spec = importlib.util.spec_from_file_location("services_under_test", REPO / "scripts" / "services.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def services_dir(services: ModuleType, tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "services"
    services.clean(tmp_path / "services")


def test_session_postgres_answers_select_one() -> None:
    with psycopg.connect(os.environ["DATABASE_URL"], connect_timeout=5) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_session_redis_answers_ping() -> None:
    assert redis.Redis.from_url(os.environ["REDIS_URL"], socket_timeout=5).ping()


def test_servers_keep_ports_and_data_across_down_and_up(services: ModuleType, services_dir: Path) -> None:
    first = services.up(services_dir)
    assert services.up(services_dir) == first  # a second `up` reuses the running servers
    with psycopg.connect(first["DATABASE_URL"], autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (value int); INSERT INTO kept VALUES (42)")
    redis.Redis.from_url(first["REDIS_URL"]).rpush("queued", "job-1")

    services.down(services_dir)
    assert not services.is_up(services_dir)
    again = services.up(services_dir)

    assert again == first
    with psycopg.connect(again["DATABASE_URL"]) as conn:
        assert conn.execute("SELECT value FROM kept").fetchall() == [(42,)]
    assert redis.Redis.from_url(again["REDIS_URL"]).lrange("queued", 0, -1) == [b"job-1"]
