"""A store away: the API answers problem+json 503 with Retry-After, pages a styled 503, and
what was committed is never answered with a 5xx.

"Away" is real here: the process's connection settings point at a port nothing listens on
(PostgreSQL), or its Redis client at one (Redis), and the real client libraries fail to
connect, exactly as when the server is down. The settings are put back afterwards.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from controlplane import access
from tests.api.conftest import assert_problem
from workflows.runtime import bus
from workflows.store.models import Run


def dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed at once: nothing listens there


@pytest.fixture
def postgres_away(transactional_db: Any) -> Iterator[None]:
    port = connection.settings_dict["PORT"]
    connection.close()
    connection.settings_dict["PORT"] = dead_port()
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict["PORT"] = port


@pytest.fixture
def redis_away(settings: Any) -> Iterator[None]:
    settings.REDIS_URL = f"redis://127.0.0.1:{dead_port()}/0"
    bus.client.cache_clear()
    try:
        yield
    finally:
        bus.client.cache_clear()


def test_the_api_answers_503_problem_with_retry_after_while_postgres_is_away(api, postgres_away) -> None:
    response = api.get("runs")
    body = assert_problem(response, 503)
    assert response["Retry-After"] == "5"
    assert body["detail"] == "PostgreSQL is unavailable; nothing was changed. Try again in 5 s."
    assert "127.0.0.1" not in response.content.decode()  # the driver's text (hosts, ports) stays in the log


def test_readiness_names_the_store_that_is_away(api, postgres_away) -> None:
    response = api.get("health/ready")
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["postgres"]["ok"] is False and checks["redis"]["ok"] is True


def test_a_page_answers_a_styled_503_while_postgres_is_away(transactional_db, person) -> None:
    client = Client(raise_request_exception=False)  # answer as Django does, with handler500
    client.force_login(person(access.VIEWER))
    port = connection.settings_dict["PORT"]
    connection.close()
    connection.settings_dict["PORT"] = dead_port()
    try:
        response = client.get("/runs/")
    finally:
        connection.close()
        connection.settings_dict["PORT"] = port
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    page = response.content.decode()
    assert "Switchyard is waiting for PostgreSQL" in page and "<html" in page


def test_a_cancel_committed_while_redis_is_away_answers_200(api, chain, redis_away) -> None:
    started = api.post("workflows/chain/runs", {"input": {}})
    assert started.status_code == 201  # committed; its notice waits for the reconciler
    run_id = started.json()["id"]
    cancelled = api.post(f"runs/{run_id}/cancel", {"reason": "not needed"})
    assert cancelled.status_code == 200, cancelled.content
    assert Run.objects.get(pk=run_id).status == "cancelled"
