"""API keys, scopes and roles, rate limiting: who may do what through the API."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.api.conftest import Api, assert_problem
from workflows.integrations import keys
from workflows.store.models import ApiKey, AuditEntry

pytestmark = pytest.mark.django_db


def test_a_request_without_a_key_is_refused_with_a_bearer_challenge(chain) -> None:
    response = Api(None).get("workflows")
    body = assert_problem(response, 401, "Authorization")
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert "Authorization: Bearer" in body["detail"]


@pytest.mark.parametrize(
    "token",
    ["sy_00000000_not-the-secret", "not-a-key", "sy_short_x"],
)
def test_a_wrong_key_is_refused(api, token) -> None:
    assert_problem(Api(token).get("workflows"), 401, "Authorization")


def test_a_wrong_secret_with_a_real_prefix_is_refused(key_for) -> None:
    plaintext = key_for()
    forged = plaintext[: len("sy_12345678_")] + "x" * 43
    assert_problem(Api(forged).get("workflows"), 401)


def test_the_basic_scheme_is_refused(key_for) -> None:
    api = Api(None)
    response = api.get("workflows", headers={"Authorization": f"Basic {key_for()}"})
    assert "Bearer" in assert_problem(response, 401)["detail"]


def test_a_revoked_key_is_refused_from_the_next_request(api, key_for) -> None:
    plaintext = key_for()
    victim = Api(plaintext)
    assert victim.get("workflows").status_code == 200
    key_id = ApiKey.objects.get(prefix=plaintext.split("_")[1]).pk
    assert api.delete(f"keys/{key_id}").json()["revoked_at"] is not None
    assert "revoked" in assert_problem(victim.get("workflows"), 401)["detail"]
    assert_problem(api.delete(f"keys/{key_id}"), 409)


def test_an_expired_key_is_refused(key_for) -> None:
    plaintext = key_for()
    ApiKey.objects.filter(prefix=plaintext.split("_")[1]).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert "expired" in assert_problem(Api(plaintext).get("workflows"), 401)["detail"]


def test_a_key_of_a_deactivated_person_is_refused(key_for) -> None:
    plaintext = key_for()
    ApiKey.objects.get(prefix=plaintext.split("_")[1]).owner.__class__.objects.update(is_active=False)
    assert "deactivated" in assert_problem(Api(plaintext).get("workflows"), 401)["detail"]


def test_a_read_key_cannot_start_runs(api_as, chain) -> None:
    reader = api_as("admin", "read")
    assert reader.get("workflows/chain").status_code == 200
    body = assert_problem(reader.post("workflows/chain/runs", {"input": {}}), 403)
    assert "'run' scope" in body["detail"]


def test_a_viewer_cannot_start_runs_even_with_a_run_scoped_key(api_as, chain) -> None:
    body = assert_problem(api_as("viewer", "read", "run").post("workflows/chain/runs", {}), 403)
    assert "operator role" in body["detail"]


def test_an_operator_can_start_and_cancel_but_cannot_publish(api_as, chain) -> None:
    operator = api_as("operator", "read", "run", "operate", "edit")
    run = operator.post("workflows/chain/runs", {"input": {}}).json()
    assert operator.post(f"runs/{run['id']}/cancel", {}).status_code == 200
    draft = api_as("editor", "edit").post(
        "workflows/chain/versions", {"definition": {"nodes": [{"id": "a", "handler": "core.noop"}]}}
    )
    number = draft.json()["number"]
    body = assert_problem(operator.post(f"workflows/chain/versions/{number}/publish", {}), 403)
    assert "editor role" in body["detail"]


def test_an_editor_publishes_with_an_edit_key(api_as, chain) -> None:
    editor = api_as("editor", "edit")
    number = editor.post(
        "workflows/chain/versions", {"definition": {"nodes": [{"id": "a", "handler": "core.noop"}]}}
    ).json()["number"]
    response = editor.post(f"workflows/chain/versions/{number}/publish", {})
    assert response.status_code == 200 and response.json()["active"] is True


def test_a_run_key_cannot_cancel(api_as, chain) -> None:
    starter = api_as("operator", "run")
    run = starter.post("workflows/chain/runs", {}).json()
    assert "'operate' scope" in assert_problem(starter.post(f"runs/{run['id']}/cancel", {}), 403)["detail"]


def test_only_admins_manage_keys_and_webhooks(api_as, chain) -> None:
    editor = api_as("editor", "read", "edit", "run", "operate")
    assert_problem(editor.get("keys"), 403)
    assert_problem(editor.post("keys", {"name": "x", "scopes": ["read"]}), 403)
    assert_problem(editor.post("workflows/chain/triggers", {"name": "x"}), 403)
    assert_problem(editor.delete("workflows/chain"), 403)


def test_a_created_key_is_shown_once_and_works(api) -> None:
    response = api.post("keys", {"name": "ci", "scopes": ["read", "run"]})
    assert response.status_code == 201
    created = response.json()
    assert created["key"].startswith(f"sy_{created['prefix']}_")
    assert created["scopes"] == ["read", "run"]
    assert "key" not in api.get(f"keys/{created['id']}").json()
    assert all("key" not in k for k in api.get("keys").json()["items"])
    stored = ApiKey.objects.get(pk=created["id"])
    assert created["key"] not in (stored.hash, stored.prefix) and stored.hash == keys.hash_key(created["key"])
    assert Api(created["key"]).get("workflows").status_code == 200
    assert AuditEntry.objects.filter(action="apikey.create", target_id=str(created["id"])).exists()


def test_a_key_can_be_made_for_another_person_with_an_expiry(api, person) -> None:
    viewer = person("viewer")
    later = (timezone.now() + timedelta(days=1)).isoformat()
    response = api.post(
        "keys", {"name": "v", "scopes": ["read"], "owner": viewer.username, "expires_at": later}
    )
    assert response.status_code == 201 and response.json()["owner"] == viewer.username
    assert_problem(api.post("keys", {"name": "v", "scopes": ["read"], "owner": "nobody"}), 422, "owner")
    past = (timezone.now() - timedelta(days=1)).isoformat()
    assert_problem(api.post("keys", {"name": "v", "scopes": ["read"], "expires_at": past}), 422, "expires_at")
    assert_problem(api.post("keys", {"name": "v", "scopes": ["root"]}), 422, "scopes[0]")


def test_use_is_recorded_at_most_once_a_minute(key_for) -> None:
    plaintext = key_for()
    Api(plaintext).get("workflows")
    key = ApiKey.objects.get(prefix=plaintext.split("_")[1])
    first = key.last_used_at
    assert first is not None
    Api(plaintext).get("workflows")
    key.refresh_from_db()
    assert key.last_used_at == first


def test_the_rate_limit_answers_429_with_retry_after(settings, key_for) -> None:
    settings.SWITCHYARD = {**settings.SWITCHYARD, "API_RATE_LIMIT_PER_MINUTE": 3}
    client = Api(key_for())
    answers = [client.get("workflows") for _ in range(3)]
    assert [r["RateLimit-Remaining"] for r in answers] == ["2", "1", "0"]
    refused = client.get("workflows")
    assert_problem(refused, 429)
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert Api(key_for()).get("workflows").status_code == 200  # per key, not global


def test_the_audit_names_the_key_and_its_owner(api, chain) -> None:
    run = api.post("workflows/chain/runs", {}).json()
    api.post(f"runs/{run['id']}/cancel", {"reason": "test"})
    entry = AuditEntry.objects.get(action="run.cancel")
    assert entry.actor_label.startswith("api key sy_") and entry.actor is not None
    assert entry.data == {"reason": "test"}


def test_admins_create_and_revoke_keys_in_the_admin(person) -> None:
    from django.test import Client

    admin_user, viewer = person("admin"), person("viewer")
    browser = Client()
    browser.force_login(admin_user)
    form = {
        "name": "from admin",
        "owner": viewer.pk,
        "scopes": ["read"],
        "expires_at_0": "",
        "expires_at_1": "",
    }
    response = browser.post("/admin/workflows/apikey/add/", form, follow=True)
    shown = [str(m) for m in response.context["messages"]]
    key = ApiKey.objects.get(name="from admin")
    plaintext = next(m.split(": ")[-1] for m in shown if "not shown again" in m)
    assert plaintext.startswith(f"sy_{key.prefix}_") and key.hash == keys.hash_key(plaintext)
    assert Api(plaintext).get("workflows").status_code == 200
    action = {"action": "revoke_keys", "_selected_action": [key.pk]}
    browser.post("/admin/workflows/apikey/", action)
    assert_problem(Api(plaintext).get("workflows"), 401)
    outsider = Client()
    outsider.force_login(person("editor"))
    assert outsider.get("/admin/workflows/apikey/").status_code in (302, 403)
