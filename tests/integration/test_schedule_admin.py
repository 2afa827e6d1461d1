"""Schedules in the Django admin: saved through the domain, a bad cron refused beside its field."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from tests.integration.conftest import node, publish
from workflows.store.models import Schedule

pytestmark = pytest.mark.django_db

FORM = {
    "kind": "cron",
    "timezone": "UTC",
    "input": "{}",
    "overlap": "skip",
    "catchup": "latest",
    "catchup_bound": "10",
    "jitter_seconds": "0",
    "enabled": "on",
}


def signed_in(role: str) -> Client:
    user = User.objects.create_user(f"{role}-admin", password="x", is_staff=True)
    user.groups.add(Group.objects.get_or_create(name=role)[0])
    client = Client()
    client.force_login(user)
    return client


def test_an_editor_adds_a_schedule_in_the_admin_with_its_next_fire(db: Any) -> None:
    workflow = publish("nightly", {"nodes": [node("a")], "edges": []})
    client = signed_in("editor")
    response = client.post(
        "/admin/workflows/schedule/add/", {**FORM, "workflow": workflow.pk, "name": "n", "cron": "0 3 * * *"}
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    schedule = Schedule.objects.get()
    assert schedule.next_fire_at is not None and schedule.next_fire_at.hour == 3


def test_a_bad_cron_is_refused_in_the_admin_beside_its_field(db: Any) -> None:
    workflow = publish("nightly", {"nodes": [node("a")], "edges": []})
    client = signed_in("editor")
    response = client.post(
        "/admin/workflows/schedule/add/", {**FORM, "workflow": workflow.pk, "name": "n", "cron": "0 25 * * *"}
    )
    assert response.status_code == 200
    assert "Bad hour" in response.content.decode()
    assert not Schedule.objects.exists()


def test_a_viewer_may_not_add_a_schedule_in_the_admin(db: Any) -> None:
    publish("nightly", {"nodes": [node("a")], "edges": []})
    assert signed_in("viewer").get("/admin/workflows/schedule/add/").status_code == 403


def test_a_schedule_whose_stored_zone_no_longer_computes_is_paused_not_fatal(db: Any) -> None:
    from django.utils import timezone

    from workflows.schedules import timetable as schedules

    workflow = publish("nightly", {"nodes": [node("a")], "edges": []})
    schedule = schedules.create_schedule(workflow, {"name": "n", "cron": "* * * * *"})
    Schedule.objects.filter(pk=schedule.pk).update(timezone="Gone/Zone", next_fire_at=timezone.now())
    assert schedules.fire_due() == 0
    schedule.refresh_from_db()
    assert schedule.enabled is False and "Gone/Zone" in schedule.last_outcome
