"""Fixtures for the REST API tests: people with roles, their API keys, and a small client.

Requests go through Django's test client (the whole URLconf, middleware and dispatcher,
in this process) against the session's real PostgreSQL and Redis.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client

from controlplane import access
from tests.integration.conftest import node, publish
from tests.integration.runtime import Runtime
from workflows.integrations import keys
from workflows.runs import actions as runs
from workflows.runtime import advancing, bus
from workflows.store.models import NodeRun, Run, Workflow

PREFIX = "/api/v1"
_names = itertools.count(1)

CHAIN = {
    "nodes": [node("first"), node("second")],
    "edges": [{"source": "first", "target": "second"}],
}


class Api:
    """Send JSON to /api/v1 with a bearer key (or none) and get Django test responses back."""

    def __init__(self, token: str | None) -> None:
        self.client = Client()
        self.token = token

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: bytes | str | None = None,
        headers: dict[str, str] | None = None,
        content_type: str = "application/json",
        **query: Any,
    ) -> Any:
        sent = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        sent.update(headers or {})
        data = raw if raw is not None else ("" if body is None else json.dumps(body))
        url = path if path.startswith("/") else f"{PREFIX}/{path}"
        return self.client.generic(
            method, url, data, content_type=content_type, headers=sent, query_params=query or None
        )

    def get(self, path: str, **query: Any) -> Any:
        return self.call("GET", path, **query)

    def post(self, path: str, body: Any = None, **kwargs: Any) -> Any:
        return self.call("POST", path, body, **kwargs)

    def put(self, path: str, body: Any = None, **kwargs: Any) -> Any:
        return self.call("PUT", path, body, **kwargs)

    def patch(self, path: str, body: Any = None, **kwargs: Any) -> Any:
        return self.call("PATCH", path, body, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> Any:
        return self.call("DELETE", path, **kwargs)


@pytest.fixture(autouse=True)
def redis_clean() -> Iterator[None]:
    bus.client().flushdb()
    yield


@pytest.fixture
def runtime(transactional_db: Any) -> Iterator[Runtime]:
    """Two real RQ workers and one real scheduler, as separate processes."""
    bus.ensure_group()
    rt = Runtime()
    rt.worker("api-worker-1")
    rt.worker("api-worker-2")
    rt.scheduler("api-scheduler-1")
    yield rt
    rt.stop()


@pytest.fixture
def person(db: Any) -> Callable[[str], Any]:
    """Make a user holding a role (viewer, operator, editor, admin)."""

    def make(role: str) -> Any:
        name = f"{role}-{next(_names)}"
        if role == access.ADMIN:
            return get_user_model().objects.create_superuser(name, f"{name}@example.test")
        user = get_user_model().objects.create_user(name, f"{name}@example.test")
        user.groups.add(Group.objects.get_or_create(name=role)[0])
        return user

    return make


@pytest.fixture
def key_for(person: Callable[[str], Any]) -> Callable[..., str]:
    """Return the plaintext of a new key for a new person of `role` with `scopes`."""

    def make(role: str = access.ADMIN, scopes: tuple[str, ...] = ("admin",), **kwargs: Any) -> str:
        _, plaintext = keys.create_key(person(role), "test key", scopes, **kwargs)
        return plaintext

    return make


@pytest.fixture
def api_as(key_for: Callable[..., str]) -> Callable[..., Api]:
    def make(role: str = access.ADMIN, *scopes: str) -> Api:
        return Api(key_for(role, scopes or ("admin",)))

    return make


@pytest.fixture
def api(api_as: Callable[..., Api]) -> Api:
    """A client with an admin's admin-scoped key: allowed everything."""
    return api_as()


@pytest.fixture
def chain(db: Any) -> Workflow:
    """A published two-node workflow `chain` (first -> second)."""
    return publish("chain", CHAIN)


def dead_letter(workflow: Workflow, node_id: str = "first", run_input: dict[str, Any] | None = None) -> Run:
    """Start a run and kill one of its nodes the way the engine does (a dead letter is filed)."""
    run, _ = runs.start_run(workflow, run_input or {})
    node = NodeRun.objects.get(run=run, node_id=node_id)
    NodeRun.objects.filter(pk=node.pk).update(status="failed", tries=1, attempt=1, error="boom: it broke")
    advancing.apply_kills([(node.pk, 1)])
    NodeRun.objects.filter(run=run).exclude(pk=node.pk).update(status="upstream_failed")
    Run.objects.filter(pk=run.pk).update(status="failed")
    return run


def assert_problem(response: Any, status: int, *paths: str) -> dict[str, Any]:
    """Check a problem+json answer and that its errors name these paths; return its body."""
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert body["status"] == status and body["type"].endswith(f"#problem-{status}")
    assert body["title"] and body["detail"] and body["instance"].startswith(PREFIX)
    assert [e["path"] for e in body["errors"]] == list(paths) if paths else True
    return body
