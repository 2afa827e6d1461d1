"""The web process keeps its PostgreSQL connections between requests (DB_POOL_SIZE, a pool
of 16 by default: controlplane/webserver.py), instead of a new backend for each request, and
replaces a kept connection PostgreSQL closed (a restart) before a request gets it.

A real Daphne process; its connections are found in pg_stat_activity by the client ports
its sockets hold."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import httpx
import psutil
from django.db import connection

from controlplane.webserver import POOL_SIZE
from tests.integration.conftest import accepts, free_port, node, publish
from tests.integration.runtime import Runtime, wait_for
from tests.integration.test_llm_streaming import api_key
from workflows.llm import follow
from workflows.runs import actions as runs


def backends_of(pid: int) -> set[int]:
    """The PostgreSQL backend pids serving process `pid`'s open connections."""
    pg_port = int(connection.settings_dict["PORT"] or 5432)
    ports = [
        c.laddr.port
        for c in psutil.Process(pid).net_connections("tcp")
        if c.raddr and c.raddr.port == pg_port
    ]
    if not ports:
        return set()
    with connection.cursor() as cur:
        cur.execute("SELECT pid FROM pg_stat_activity WHERE client_port = ANY(%s)", [ports])
        return {row[0] for row in cur.fetchall()}


def test_requests_reuse_the_web_process_connections(transactional_db: Any) -> None:
    port = free_port()
    rt = Runtime()
    web = rt.web("web", port)
    ready = f"http://127.0.0.1:{port}/api/v1/health/ready"  # reads PostgreSQL
    try:
        wait_for(lambda: accepts(port), 30, "Daphne to listen")
        with httpx.Client(timeout=20) as client:
            client.get(ready)
            before = backends_of(web.pid)
            for _ in range(30):
                assert "postgres" in client.get(ready).json()["checks"]
        after = backends_of(web.pid)
        # Without a pool each request closes its connection: none would be left between them.
        assert before, "the web process keeps connections once a request is answered"
        assert before & after, "the later requests were served by the same backends"
        assert len(after) <= POOL_SIZE
    finally:
        rt.stop()


def test_a_kept_connection_postgresql_closed_is_replaced_before_a_request_gets_it(
    transactional_db: Any,
) -> None:
    port = free_port()
    rt = Runtime()
    web = rt.web("web", port)
    ready = f"http://127.0.0.1:{port}/api/v1/health/ready"
    try:
        wait_for(lambda: accepts(port), 30, "Daphne to listen")
        with httpx.Client(timeout=20) as client:
            client.get(ready)
            kept = backends_of(web.pid)
            assert kept
            with connection.cursor() as cur:  # what a PostgreSQL restart does to them
                cur.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM unnest(%s::int[]) AS pid", [list(kept)]
                )
            answers = [client.get(ready).json()["checks"]["postgres"] for _ in range(2 * len(kept))]
        assert all(check["ok"] for check in answers), answers
        assert not kept & backends_of(web.pid)
    finally:
        rt.stop()


def test_streams_that_follow_an_attempt_hold_no_pooled_connection(transactional_db: Any) -> None:
    """An SSE follower may stay open for minutes: its request's connection, and those its
    quiet checks of the node use, go back to the pool, so a pool of 2 serves 4 followers and
    the requests beside them."""
    port = free_port()
    rt = Runtime(DB_POOL_SIZE="2")
    rt.web("web", port)
    run, _ = runs.start_run(publish("followed", {"nodes": [node("ask")]}), {})  # no worker: it stays queued
    url = f"http://127.0.0.1:{port}/api/v1/runs/{run.pk}/nodes/ask/attempts/1/stream"
    headers = {"Authorization": f"Bearer {api_key()}"}
    ready = f"http://127.0.0.1:{port}/api/v1/health/ready"
    try:
        wait_for(lambda: accepts(port), 30, "Daphne to listen")
        with contextlib.ExitStack() as followers:
            for _ in range(4):  # each opens within 5 s: none waits for a pooled connection (10 s)
                response = followers.enter_context(httpx.stream("GET", url, headers=headers, timeout=5))
                assert response.status_code == 200 and next(response.iter_lines()) == "retry: 2000"
            time.sleep(3 * follow.QUIET_SECONDS)  # the followers check the node while it is quiet
            assert httpx.get(ready, timeout=5).json()["checks"]["postgres"]["ok"]
    finally:
        rt.stop()
