"""LLM providers and prices over the API: admins only, the key write-only, validation by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from controlplane import access
from tests.api.conftest import Api, assert_problem
from workflows.store.models import AuditEntry, LLMProvider

pytestmark = pytest.mark.django_db
KEY = "sk-live-do-not-show-8d1f"
ACME = {
    "name": "acme",
    "base_url": "https://llm.acme.test/v1",
    "default_model": "acme-large",
    "models": ["acme-small"],
    "timeout_seconds": 20,
    "api_key": KEY,
}


def test_an_admin_adds_a_provider_and_the_key_is_never_answered(api: Api) -> None:
    created = api.post("llm/providers", ACME)
    assert created.status_code == 201, created.content
    assert created["Location"] == "/api/v1/llm/providers/acme"
    body = created.json()
    assert body["has_key"] is True and body["models"] == ["acme-large", "acme-small"]
    for response in (created, api.get("llm/providers"), api.get("llm/providers/acme")):
        assert KEY not in response.content.decode()
    assert LLMProvider.objects.get(name="acme").api_key == KEY
    entry = AuditEntry.objects.get(action="llm_provider.create")
    assert entry.data["key_changed"] is True and KEY not in str(entry.data)


def test_a_change_without_a_key_keeps_the_stored_one_and_an_empty_key_clears_it(api: Api) -> None:
    api.post("llm/providers", ACME)
    kept = api.put(
        "llm/providers/acme", {**ACME, "api_key": None, "default_model": "acme-small", "models": []}
    )
    assert kept.status_code == 200 and kept.json()["has_key"] is True
    assert kept.json()["models"] == ["acme-small"]
    assert LLMProvider.objects.get(name="acme").api_key == KEY
    cleared = api.put("llm/providers/acme", {**ACME, "api_key": ""})
    assert cleared.json()["has_key"] is False


def test_one_default_provider_at_a_time(api: Api) -> None:
    api.post("llm/providers", {**ACME, "is_default": True})
    api.post("llm/providers", {**ACME, "name": "other", "is_default": True})
    assert list(LLMProvider.objects.filter(is_default=True).values_list("name", flat=True)) == ["other"]


def test_a_second_provider_of_the_same_name_is_a_conflict(api: Api) -> None:
    api.post("llm/providers", ACME)
    assert_problem(api.post("llm/providers", ACME), 409)


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"name": "Bad Name"}, "name"),
        ({"base_url": "ftp://x"}, "base_url"),
        ({"base_url": "http://[::1/v1"}, "base_url"),  # urlsplit raised: a 500 Schemathesis found
        ({"base_url": "http://x.test/v 1"}, "base_url"),
        ({"timeout_seconds": 0}, "timeout_seconds"),
        ({"default_model": ""}, "default_model"),
    ],
)
def test_a_bad_provider_is_refused_naming_the_field(api: Api, change: dict[str, Any], path: str) -> None:
    body = assert_problem(api.post("llm/providers", {**ACME, **change}), 422)
    assert path in str(body)


def test_credentials_in_the_url_are_refused(api: Api) -> None:
    body = assert_problem(api.post("llm/providers", {**ACME, "base_url": "https://u:p@x.test/v1"}), 422)
    assert "base_url" in body["detail"]


@pytest.mark.parametrize("role", [access.EDITOR, access.OPERATOR, access.VIEWER])
def test_only_admins_manage_providers(api_as: Callable[..., Api], role: str) -> None:
    scoped = api_as(role, "read", "edit", "operate", "run")
    assert_problem(scoped.get("llm/providers"), 403)
    assert_problem(scoped.post("llm/providers", ACME), 403)
    assert_problem(scoped.put("llm/prices/m", {"input_per_million": 1, "output_per_million": 1}), 403)


def test_prices_are_set_listed_and_deleted(api: Api) -> None:
    set_ = api.put("llm/prices/acme-large", {"input_per_million": 2.5, "output_per_million": 10})
    assert set_.status_code == 200 and set_.json() == {
        "model": "acme-large",
        "provider": None,
        "input_per_million": "2.5",
        "output_per_million": "10",
    }
    assert api.get("llm/prices").json()["items"] == [set_.json()]
    assert api.delete("llm/prices/acme-large").status_code == 204
    assert_problem(api.delete("llm/prices/acme-large"), 404)


def test_a_definition_naming_an_unknown_provider_or_model_is_refused(api: Api) -> None:
    api.post("llm/providers", ACME)
    api.post("workflows", {"slug": "asks", "title": "Asks"})
    node = {"id": "ask", "handler": "llm.chat", "config": {"prompt": "hi", "provider": "nope"}}
    body = assert_problem(api.post("workflows/asks/versions", {"definition": {"nodes": [node]}}), 422)
    assert [e["path"] for e in body["errors"]] == ["definition.nodes[0].config.provider"]
    node["config"] = {"prompt": "hi", "provider": "acme", "model": "acme-huge"}
    body = assert_problem(api.post("workflows/asks/versions", {"definition": {"nodes": [node]}}), 422)
    assert [e["path"] for e in body["errors"]] == ["definition.nodes[0].config.model"]
    node["config"] = {"prompt": "hi", "provider": "acme", "model": "acme-small"}
    assert api.post("workflows/asks/versions", {"definition": {"nodes": [node]}}).status_code == 201
