"""Fixtures for the editor's tests: a logged-in Django test client per role, which calls the
pages and, as the canvas script does, /api/v1 with its session (the workflows they act on
come from tests/factories.py)."""

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

    def post(self, url: str, body: Any = None, raw: str | None = None, **headers: str) -> Any:
        return self.send("POST", url, body, raw, headers)

    def put(self, url: str, body: Any = None, **headers: str) -> Any:
        return self.send("PUT", url, body, None, headers)

    def send(self, method: str, url: str, body: Any, raw: str | None, headers: dict[str, str]) -> Any:
        data = raw if raw is not None else json.dumps(body if body is not None else {})
        return self.client.generic(method, url, data, content_type="application/json", headers=headers)


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
    """Return the path of a workflow's page."""
    return f"/workflows/{slug}/{tail}"


def api(slug: str, tail: str = "") -> str:
    """Return the /api/v1 path of a workflow (or of something under it)."""
    return f"/api/v1/workflows/{slug}" + (f"/{tail}" if tail else "")


def if_match(client: JsonClient, slug: str, number: int) -> dict[str, str]:
    """Read a version as the editor opens it; return the header its save sends back."""
    response = client.get(api(slug, f"versions/{number}"))
    assert response.status_code == 200, response.content
    return {"If-Match": response["ETag"]}
