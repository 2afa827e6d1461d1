from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from controlplane import access
from tests.integration.conftest import node, publish
from workflows.runs import actions as runs
from workflows.runtime import bus
from workflows.store.models import DeadLetter, NodeRun, Run


@pytest.fixture
def role_user(db: None) -> Any:
    """Make a user holding a role (or none), with a fast password."""

    def make(role: str | None, username: str | None = None) -> User:
        user = User.objects.create(username=username or role or "nobody")
        if role:
            user.groups.add(Group.objects.get_or_create(name=role)[0])
        return user

    return make


@pytest.fixture
def client_as(role_user: Any) -> Any:
    def make(role: str | None) -> Client:
        client = Client()
        client.force_login(role_user(role))
        return client

    return make


@pytest.fixture
def redis_clean() -> None:
    bus.client().flushdb()


@pytest.fixture
def dead_letter(db: None, redis_clean: None) -> DeadLetter:
    """An open dead letter of a one-node run (made directly: no workers involved)."""
    workflow = publish("drill", {"nodes": [node("boom", "core.fail")]})
    run, _ = runs.start_run(workflow, {"order": 1})
    Run.objects.filter(pk=run.pk).update(status="failed")
    boom = NodeRun.objects.get(run=run, node_id="boom")
    NodeRun.objects.filter(pk=boom.pk).update(status="dead", attempt=1, tries=1)
    return DeadLetter.objects.create(run=run, node_run=boom, node_id="boom", attempt=1, error="boom failed")


ROLES = access.ROLES
