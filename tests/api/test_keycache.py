"""A key a process remembers (integrations/keycache.py) never outlives a change to it.

"Another process" is played honestly: the change is written with `QuerySet.update()` (no
signal reaches this process, as none would reach it from another one) and what that other
process's signal does in Redis, `replace_epoch`, is all this process hears of it.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.api.conftest import Api, assert_problem
from workflows.api.errors import ApiError
from workflows.integrations import keycache, keys
from workflows.mcp_endpoint import endpoint as mcp_endpoint
from workflows.runtime import bus
from workflows.store.models import ApiKey

pytestmark = pytest.mark.django_db


@pytest.fixture
def long_memory(monkeypatch: Any) -> None:
    """Trust a remembered key for a minute, so that only the epoch can end it in a test."""
    monkeypatch.setattr(keycache, "FRESH_FOR", 60.0)


def prefix(plaintext: str) -> str:
    return plaintext.split("_")[1]


def test_a_remembered_key_starts_a_run_with_one_statement(long_memory, key_for, chain) -> None:
    client = Api(key_for())
    assert client.post("workflows/chain/runs", {}).status_code == 201
    with CaptureQueriesContext(connection) as queries:
        assert client.post("workflows/chain/runs", {}).status_code == 201
    assert len(queries.captured_queries) == 1, [q["sql"][:80] for q in queries.captured_queries]


def test_a_key_revoked_by_another_process_is_refused_on_the_next_request(long_memory, key_for) -> None:
    plaintext = key_for()
    client = Api(plaintext)
    assert client.get("workflows").status_code == 200
    ApiKey.objects.filter(prefix=prefix(plaintext)).update(revoked_at=timezone.now())
    assert client.get("workflows").status_code == 200  # remembered: nothing told this process yet
    keycache.replace_epoch()  # what the revoking process's signal does
    assert "revoked" in assert_problem(client.get("workflows"), 401)["detail"]


def test_scopes_narrowed_by_another_process_count_from_the_next_request(long_memory, key_for, chain) -> None:
    plaintext = key_for()
    client = Api(plaintext)
    assert client.post("workflows/chain/runs", {}).status_code == 201
    ApiKey.objects.filter(prefix=prefix(plaintext)).update(scopes=["read"])
    keycache.replace_epoch()
    assert "'run' scope" in assert_problem(client.post("workflows/chain/runs", {}), 403)["detail"]


def test_a_role_taken_away_counts_from_the_next_request_and_tells_other_processes(
    long_memory, person, chain
) -> None:
    operator = person("operator")
    client = Api(keys.create_key(operator, "k", ["run"])[1])
    assert client.post("workflows/chain/runs", {}).status_code == 201
    epoch = bus.client().get(keycache.EPOCH_KEY)
    operator.groups.remove(Group.objects.get(name="operator"))
    assert bus.client().get(keycache.EPOCH_KEY) != epoch
    assert "operator role" in assert_problem(client.post("workflows/chain/runs", {}), 403)["detail"]


def test_an_owner_deactivated_is_refused_from_the_next_request(long_memory, key_for) -> None:
    plaintext = key_for()
    client = Api(plaintext)
    assert client.get("workflows").status_code == 200
    owner = ApiKey.objects.get(prefix=prefix(plaintext)).owner
    owner.is_active = False
    owner.save()
    assert "deactivated" in assert_problem(client.get("workflows"), 401)["detail"]


def test_a_redis_emptied_since_makes_every_key_read_again(long_memory, key_for) -> None:
    plaintext = key_for()
    client = Api(plaintext)
    assert client.get("workflows").status_code == 200
    ApiKey.objects.filter(prefix=prefix(plaintext)).update(revoked_at=timezone.now())
    bus.client().flushdb()  # a restarted Redis: no epoch matches what was remembered
    assert_problem(client.get("workflows"), 401)


def test_a_change_no_signal_reports_is_seen_once_the_memory_is_stale(monkeypatch, key_for) -> None:
    plaintext = key_for()
    client = Api(plaintext)
    assert client.get("workflows").status_code == 200
    ApiKey.objects.filter(prefix=prefix(plaintext)).update(revoked_at=timezone.now())
    monkeypatch.setattr(keycache, "FRESH_FOR", 0.0)  # FRESH_FOR seconds later
    assert_problem(client.get("workflows"), 401)


def test_a_wrong_secret_with_a_remembered_prefix_is_refused(long_memory, key_for) -> None:
    plaintext = key_for()
    assert Api(plaintext).get("workflows").status_code == 200
    assert_problem(Api(plaintext[:-4] + "AAAA").get("workflows"), 401)


def test_a_remembered_key_counts_against_its_rate_limit(long_memory, settings, key_for) -> None:
    settings.SWITCHYARD = {**settings.SWITCHYARD, "API_RATE_LIMIT_PER_MINUTE": 3}
    client = Api(key_for())
    answers = [client.get("workflows") for _ in range(3)]
    assert [r["RateLimit-Remaining"] for r in answers] == ["2", "1", "0"]
    assert_problem(client.get("workflows"), 429)


def test_testing_a_draft_checks_the_editor_role_read_with_the_key(long_memory, person, chain) -> None:
    editor = Api(keys.create_key(person("editor"), "k", ["read", "run", "edit"])[1])
    draft = {"definition": {"nodes": [{"id": "only", "handler": "core.noop"}]}, "comment": "t"}
    assert editor.post("workflows/chain/versions", draft).status_code == 201
    assert editor.get("workflows").status_code == 200  # the key and its owner's role remembered
    with CaptureQueriesContext(connection) as queries:
        assert editor.post("workflows/chain/versions/2/test-runs").status_code == 201
    read_groups = [q["sql"][:80] for q in queries.captured_queries if "auth_user_groups" in q["sql"]]
    assert read_groups == []


def test_the_mcp_endpoint_admits_a_remembered_key_with_no_statement_until_it_is_revoked(
    long_memory, key_for
) -> None:
    plaintext = key_for()
    first = mcp_endpoint.admit(f"Bearer {plaintext}")
    with CaptureQueriesContext(connection) as queries:
        again = mcp_endpoint.admit(f"Bearer {plaintext}")
    assert (again.key.pk, again.role, len(queries.captured_queries)) == (first.key.pk, "admin", 0)
    ApiKey.objects.filter(prefix=prefix(plaintext)).update(revoked_at=timezone.now())
    keycache.replace_epoch()  # what the revoking process's signal does
    with pytest.raises(ApiError) as refused:
        mcp_endpoint.admit(f"Bearer {plaintext}")
    assert (refused.value.status, "revoked" in refused.value.detail) == (401, True)
