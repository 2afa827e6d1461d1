"""Schedules over the API: create, read, change, pause, delete; bad cron and time zone; roles.
Run priorities: given at start, defaulted from the workflow, filtered on."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from controlplane import access
from tests.api.conftest import Api, assert_problem
from tests.api.test_webhooks import send, signed
from workflows.store.models import AuditEntry, Schedule, Workflow

pytestmark = pytest.mark.django_db

WEEKDAYS = {"name": "mornings", "cron": "0 9 * * 1-5", "timezone": "Europe/Berlin", "input": {"n": 1}}


def test_a_schedule_is_created_with_its_next_fire_times(api: Api, chain: Workflow) -> None:
    response = api.post("workflows/chain/schedules", WEEKDAYS)
    assert response.status_code == 201, response.content
    body = response.json()
    assert response["Location"] == body["url"]
    assert body["overlap"] == "skip" and body["catchup"] == "latest" and body["enabled"] is True
    upcoming = [datetime.fromisoformat(t) for t in body["upcoming"]]
    assert len(upcoming) == 3 and upcoming == sorted(upcoming)
    berlin = [t.astimezone(ZoneInfo("Europe/Berlin")) for t in upcoming]
    assert all(t.hour == 9 and t.minute == 0 and t.isoweekday() <= 5 for t in berlin)
    assert datetime.fromisoformat(body["next_fire_at"]) == upcoming[0]
    listed = api.get("workflows/chain/schedules").json()["items"]
    assert [s["name"] for s in listed] == ["mornings"]
    assert AuditEntry.objects.filter(action="schedule.create", target_id=str(body["id"])).exists()


def test_an_invalid_cron_is_refused_naming_the_field_and_the_parse_error(api: Api, chain: Workflow) -> None:
    body = assert_problem(
        api.post("workflows/chain/schedules", {**WEEKDAYS, "cron": "61 * * * *"}), 422, "cron"
    )
    assert "Bad minute" in body["errors"][0]["message"]
    assert not Schedule.objects.exists()


def test_an_unknown_time_zone_is_refused_naming_the_field(api: Api, chain: Workflow) -> None:
    body = assert_problem(
        api.post("workflows/chain/schedules", {**WEEKDAYS, "timezone": "Mars/Olympus"}), 422, "timezone"
    )
    assert "Mars/Olympus" in body["errors"][0]["message"]


def test_a_change_with_a_bad_cron_is_refused_and_changes_nothing(api: Api, chain: Workflow) -> None:
    created = api.post("workflows/chain/schedules", WEEKDAYS).json()
    body = assert_problem(api.patch(f"schedules/{created['id']}", {"cron": "* * *"}), 422, "cron")
    assert "Wrong number of fields" in body["errors"][0]["message"]
    assert Schedule.objects.get(pk=created["id"]).cron == "0 9 * * 1-5"


def test_a_schedule_is_changed_paused_resumed_and_deleted(api: Api, chain: Workflow) -> None:
    created = api.post("workflows/chain/schedules", WEEKDAYS).json()
    changed = api.patch(f"schedules/{created['id']}", {"kind": "interval", "interval_seconds": 60})
    assert changed.status_code == 200, changed.content
    times = [datetime.fromisoformat(t) for t in changed.json()["upcoming"]]
    assert [(b - a).total_seconds() for a, b in zip(times, times[1:], strict=False)] == [60.0, 60.0]
    assert api.post(f"schedules/{created['id']}/pause").json()["enabled"] is False
    assert api.post(f"schedules/{created['id']}/resume").json()["enabled"] is True
    assert api.delete(f"schedules/{created['id']}").status_code == 204
    assert api.get(f"schedules/{created['id']}").status_code == 404


def test_a_second_schedule_with_the_same_name_is_refused(api: Api, chain: Workflow) -> None:
    api.post("workflows/chain/schedules", WEEKDAYS)
    assert_problem(api.post("workflows/chain/schedules", WEEKDAYS), 409, "name")


def test_an_operator_reads_schedules_but_may_not_create_one(api_as, chain: Workflow) -> None:
    operator = api_as(access.OPERATOR, "read", "run", "operate")
    assert operator.get("workflows/chain/schedules").status_code == 200
    assert operator.post("workflows/chain/schedules", WEEKDAYS).status_code == 403
    editor = api_as(access.EDITOR, "read", "edit")
    assert editor.post("workflows/chain/schedules", WEEKDAYS).status_code == 201


def test_an_operator_pauses_resumes_and_runs_a_schedule_now_but_may_not_delete_it(
    api: Api, api_as, chain: Workflow
) -> None:
    created = api.post("workflows/chain/schedules", WEEKDAYS).json()
    operator = api_as(access.OPERATOR, "read", "run", "operate")
    assert operator.post(f"schedules/{created['id']}/pause").json()["enabled"] is False
    assert operator.post(f"schedules/{created['id']}/resume").json()["enabled"] is True
    started = operator.post(f"schedules/{created['id']}/run")
    assert started.status_code == 201, started.content
    run = started.json()
    assert started["Location"] == run["url"]
    assert chain.runs.get(pk=run["id"]).input == {"n": 1}  # the schedule's input
    listed = api.get(f"schedules/{created['id']}").json()["recent_runs"]
    assert [r["id"] for r in listed] == [run["id"]]
    assert AuditEntry.objects.filter(action="schedule.run_now", target_id=str(created["id"])).exists()
    assert operator.delete(f"schedules/{created['id']}").status_code == 403
    viewer = api_as(access.VIEWER, "read")
    assert viewer.post(f"schedules/{created['id']}/run").status_code == 403
    assert viewer.post(f"schedules/{created['id']}/pause").status_code == 403


def test_a_run_takes_the_priority_it_is_started_with_or_the_workflows_default(
    api: Api, chain: Workflow
) -> None:
    urgent = api.post("workflows/chain/runs", {"input": {}, "priority": 7}).json()
    Workflow.objects.filter(pk=chain.pk).update(default_priority=-3)
    plain = api.post("workflows/chain/runs", {"input": {}}).json()
    assert (urgent["priority"], plain["priority"]) == (7, -3)
    listed = api.get("runs", priority_min=0).json()["items"]
    assert [r["id"] for r in listed] == [urgent["id"]]


def test_a_priority_out_of_range_is_refused_naming_the_field(api: Api, chain: Workflow) -> None:
    assert_problem(api.post("workflows/chain/runs", {"input": {}, "priority": 101}), 422, "priority")


def test_a_trigger_gives_its_runs_its_priority(api: Api, chain: Workflow) -> None:
    trigger = api.post("workflows/chain/triggers", {"name": "pager", "priority": 6}).json()
    assert trigger["priority"] == 6
    response = send(trigger, b"{}", signed(trigger["secret"], b"{}"))
    assert response.status_code == 201, response.content
    assert response.json()["priority"] == 6


def test_the_default_priority_is_set_on_the_workflow_and_refused_out_of_range(
    api: Api, chain: Workflow
) -> None:
    assert api.patch("workflows/chain", {"default_priority": 4}).json()["default_priority"] == 4
    assert api.post("workflows/chain/runs", {"input": {}}).json()["priority"] == 4
    assert_problem(api.patch("workflows/chain", {"default_priority": 500}), 422, "default_priority")
