"""Fixtures for the editor's view tests: a logged-in Django test client per role (the
workflows they act on come from tests/factories.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from controlplane import access

ROLES_AND_NOBODY = ("anonymous", "norole", *access.ROLES)


class JsonClient:
    """A Django test client that sends and reads JSON."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def get(self, url: str, **query: Any) -> Any:
        return self.client.get(url, query or None, headers={"Accept": "application/json"})

    def post(self, url: str, body: Any = None, raw: str | None = None) -> Any:
        data = raw if raw is not None else json.dumps(body if body is not None else {})
        return self.client.post(url, data, content_type="application/json")


@pytest.fixture
def make_user(db: None) -> Callable[[str], User]:
    def make(role: str) -> User:
        user = User.objects.create(username=f"{role}-user")  # no password: force_login, no slow hashing
        if role in access.ROLES:
            user.groups.add(Group.objects.get_or_create(name=role)[0])
        return user

    return make


@pytest.fixture
def client_as(make_user: Callable[[str], User]) -> Callable[[str], JsonClient]:
    """Return a JSON client logged in as a role ("anonymous": not logged in; "norole": no group)."""

    def login(role: str) -> JsonClient:
        client = Client()
        if role != "anonymous":
            client.force_login(make_user(role))
        return JsonClient(client)

    return login


@pytest.fixture
def editor(client_as: Callable[[str], JsonClient]) -> JsonClient:
    return client_as(access.EDITOR)


def url(slug: str, tail: str = "") -> str:
    return f"/workflows/{slug}/{tail}"
