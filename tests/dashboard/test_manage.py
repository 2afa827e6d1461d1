"""Keys, triggers, subscriptions and pause/resume from the pages: who may, and what it does."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from tests.integration.conftest import node, publish
from workflows.integrations import keys, webhooks
from workflows.operations import workers
from workflows.runs import actions as runs
from workflows.runtime import bus
from workflows.store.models import ApiKey, AuditEntry, Trigger, WebhookDelivery, WebhookSubscription, Workflow


@pytest.fixture
def workflow(db: None) -> Workflow:
    return publish("shop", {"nodes": [node("a", "core.echo")]})


@pytest.fixture
def delivery(workflow: Workflow) -> WebhookDelivery:
    subscription = webhooks.create_subscription(workflow, "http://127.0.0.1:9/hook", ["run.failed"])
    return WebhookDelivery.objects.create(
        subscription=subscription,
        event_id=1,
        event_type="run.failed",
        payload={"run": 1},
        status=WebhookDelivery.FAILED,
        attempts=5,
        next_attempt_at=timezone.now(),
        error="HTTP 500",
    )


def admin_posts(workflow: Workflow, delivery: WebhookDelivery) -> list[str]:
    trigger = webhooks.create_trigger(workflow, "t")
    key, _ = keys.create_key(delivery.subscription.created_by or make_owner(), "k", ["read"])
    base = f"/workflows/{workflow.slug}/webhooks"
    sub = delivery.subscription_id
    return [
        "/keys/",
        f"/keys/{key.pk}/revoke/",
        f"{base}/triggers/",
        f"{base}/triggers/{trigger.pk}/rotate/",
        f"{base}/triggers/{trigger.pk}/delete/",
        f"{base}/subscriptions/",
        f"{base}/subscriptions/{sub}/delete/",
        f"{base}/subscriptions/{sub}/deliveries/{delivery.pk}/resend/",
    ]


def make_owner() -> User:
    return User.objects.create(username="owner", is_superuser=True)


@pytest.mark.parametrize("role", [None, "viewer", "operator", "editor"])
def test_only_admins_manage_keys_and_webhooks(
    workflow: Workflow, delivery: WebhookDelivery, client_as: Any, role: str | None
) -> None:
    client = client_as(role)
    for url in [
        "/keys/",
        "/workflows/shop/webhooks/",
        f"/workflows/shop/webhooks/subscriptions/{delivery.subscription_id}/",
    ]:
        assert client.get(url).status_code == 403, url
    for url in admin_posts(workflow, delivery):
        assert (
            client.post(
                url, {"name": "x", "scopes": ["read"], "url": "http://x.test/", "events": ["run.failed"]}
            ).status_code
            == 403
        ), url
    assert not AuditEntry.objects.filter(actor__username=role or "nobody").exists()


@pytest.mark.parametrize("role", [None, "viewer"])
def test_pause_and_resume_are_refused_below_operator(
    workflow: Workflow, client_as: Any, role: str | None
) -> None:
    client = client_as(role)
    assert client.post("/workflows/shop/pause/").status_code == 403
    assert client.post("/workflows/shop/resume/").status_code == 403
    assert not Workflow.objects.get(pk=workflow.pk).paused


def test_an_operator_pauses_and_resumes_a_workflow_audited(workflow: Workflow, client_as: Any) -> None:
    client = client_as("operator")
    assert b'data-action="pause"' in client.get("/workflows/shop/live/").content
    assert client.post("/workflows/shop/pause/").status_code == 302
    assert Workflow.objects.get(pk=workflow.pk).paused
    assert b'data-action="resume"' in client.get("/workflows/shop/live/").content
    client.post("/workflows/shop/resume/")
    assert not Workflow.objects.get(pk=workflow.pk).paused
    actions = list(AuditEntry.objects.filter(actor__username="operator").values_list("action", flat=True))
    assert sorted(actions) == ["workflow.pause", "workflow.resume"]


def test_a_viewer_sees_no_pause_button(workflow: Workflow, client_as: Any) -> None:
    page = client_as("viewer").get("/workflows/shop/live/").content
    assert b'data-action="pause"' not in page and b"Webhooks</a>" not in page


def test_an_admin_creates_a_key_shown_once_and_revokes_it(db: None, client_as: Any) -> None:
    client = client_as("admin")
    page = client.post("/keys/", {"name": "ci", "scopes": ["read", "run"], "expires_at": "2099-01-01T00:00"})
    key = ApiKey.objects.get(name="ci")
    assert page.status_code == 200 and key.scopes == ["read", "run"] and key.expires_at.year == 2099
    shown = page.context["plaintext"]
    assert keys.verify(shown).pk == key.pk and shown.encode() in page.content
    assert shown.encode() not in client.get("/keys/").content
    client.post(f"/keys/{key.pk}/revoke/")
    assert ApiKey.objects.get(pk=key.pk).revoked_at is not None
    assert set(AuditEntry.objects.values_list("action", flat=True)) == {"apikey.create", "apikey.revoke"}


def test_a_key_with_no_scope_is_refused_naming_the_field(db: None, client_as: Any) -> None:
    page = client_as("admin").post("/keys/", {"name": "ci"})
    assert page.status_code == 400 and b"scopes: give one or more" in page.content
    assert not ApiKey.objects.exists()


def test_an_admin_creates_rotates_and_deletes_a_trigger(workflow: Workflow, client_as: Any) -> None:
    client = client_as("admin")
    created = client.post("/workflows/shop/webhooks/triggers/", {"name": "orders"})
    trigger = Trigger.objects.get(name="orders")
    assert (
        trigger.secret.encode() in created.content
        and f"/api/v1/hooks/{trigger.pk}".encode() in created.content
    )
    rotated = client.post(f"/workflows/shop/webhooks/triggers/{trigger.pk}/rotate/")
    fresh = Trigger.objects.get(pk=trigger.pk).secret
    assert fresh != trigger.secret and fresh.encode() in rotated.content
    client.post(f"/workflows/shop/webhooks/triggers/{trigger.pk}/delete/")
    assert not Trigger.objects.exists()
    actions = set(AuditEntry.objects.values_list("action", flat=True))
    assert {"trigger.create", "trigger.rotate", "trigger.delete"} <= actions


def test_a_trigger_of_another_workflow_is_not_found(workflow: Workflow, client_as: Any) -> None:
    other = publish("other", {"nodes": [node("a", "core.echo")]})
    trigger = webhooks.create_trigger(other, "theirs")
    assert (
        client_as("admin").post(f"/workflows/shop/webhooks/triggers/{trigger.pk}/delete/").status_code == 404
    )
    assert Trigger.objects.filter(pk=trigger.pk).exists()


def test_a_subscription_with_a_bad_url_is_refused_naming_the_field(
    workflow: Workflow, client_as: Any
) -> None:
    client = client_as("admin")
    answer = client.post(
        "/workflows/shop/webhooks/subscriptions/", {"url": "ftp://x", "events": ["run.failed"]}, follow=True
    )
    assert b"url: must start with http" in answer.content
    assert not WebhookSubscription.objects.exists()


def test_send_again_resets_a_finished_delivery_once(delivery: WebhookDelivery, client_as: Any) -> None:
    client = client_as("admin")
    url = (
        f"/workflows/shop/webhooks/subscriptions/{delivery.subscription_id}/deliveries/{delivery.pk}/resend/"
    )
    assert (
        b'data-action="resend"'
        in client.get(f"/workflows/shop/webhooks/subscriptions/{delivery.subscription_id}/").content
    )
    client.post(url)
    again = WebhookDelivery.objects.get(pk=delivery.pk)
    assert (again.status, again.attempts) == ("pending", 0)
    second = client.post(url, follow=True)
    assert b"only a finished delivery is sent again" in second.content
    assert AuditEntry.objects.filter(action="delivery.resend").count() == 1


@pytest.fixture
def known_worker(redis_clean: None) -> str:
    bus.beat_worker("worker-x", 30, {})
    return "worker-x"


@pytest.mark.parametrize("role", [None, "viewer", "operator", "editor"])
def test_only_admins_drain_or_pause_workers(known_worker: str, client_as: Any, role: str | None) -> None:
    client = client_as(role)
    assert client.post("/workers/drain/", {"worker": known_worker, "action": "drain"}).status_code == 403
    assert client.post("/workers/pause/", {"action": "pause"}).status_code == 403
    assert workers.drained([known_worker]) == set() and not workers.are_paused()
    if role is not None:
        assert b'data-action="drain"' not in client.get("/workers/").content


def test_an_admin_drains_and_lets_go_a_worker_audited(known_worker: str, client_as: Any) -> None:
    client = client_as("admin")
    client.post("/workers/drain/", {"worker": known_worker, "action": "drain"})
    assert workers.drained([known_worker]) == {known_worker}
    client.post("/workers/drain/", {"worker": known_worker, "action": "undrain"})
    assert workers.drained([known_worker]) == set()
    unknown = client.post("/workers/drain/", {"worker": "nobody", "action": "drain"}, follow=True)
    assert b"No worker named" in unknown.content
    actions = list(AuditEntry.objects.order_by("id").values_list("action", "target_id"))
    assert actions == [("worker.drain", known_worker), ("worker.undrain", known_worker)]


def test_an_admin_pauses_and_resumes_every_worker(known_worker: str, client_as: Any) -> None:
    client = client_as("admin")
    client.post("/workers/pause/", {"action": "pause"})
    assert workers.are_paused()
    client.post("/workers/pause/", {"action": "resume"})
    assert not workers.are_paused()
    assert {"workers.pause", "workers.resume"} == set(AuditEntry.objects.values_list("action", flat=True))


def test_resuming_says_how_many_waiting_runs_started(workflow: Workflow, client_as: Any) -> None:
    client = client_as("operator")
    client.post("/workflows/shop/pause/")
    runs.start_run(workflow, {})
    page = client.post("/workflows/shop/resume/", follow=True)
    assert b"shop resumed: 1 waiting run(s) started." in page.content
