"""Who may see and do what on the dashboard's pages, and what the actions do."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.test import Client

from tests.integration.conftest import node, publish
from workflows.runs import actions as runs, letters as deadletters
from workflows.runtime import advancing
from workflows.store.models import AuditEntry, DeadLetter, NodeRun, Run

PAGES = ["/", "/runs/", "/dead-letters/", "/workers/", "/workflows/drill/live/"]


def page_urls(letter: DeadLetter) -> list[str]:
    return [
        *PAGES,
        f"/runs/{letter.run_id}/",
        f"/runs/{letter.run_id}/nodes/boom/",
        f"/dead-letters/{letter.pk}/",
        "/workflows/drill/live/nodes/boom/",
    ]


def test_anonymous_visitors_are_sent_to_the_login_page(dead_letter: DeadLetter) -> None:
    for url in page_urls(dead_letter):
        response = Client().get(url)
        assert response.status_code == 302 and response.url.startswith("/accounts/login/?next="), url


def test_users_without_a_role_are_refused(dead_letter: DeadLetter, client_as: Any) -> None:
    client = client_as(None)
    for url in page_urls(dead_letter):
        assert client.get(url).status_code == 403, url


@pytest.mark.parametrize("role", ["viewer", "operator", "editor", "admin"])
def test_every_role_sees_every_page(dead_letter: DeadLetter, client_as: Any, role: str) -> None:
    client = client_as(role)
    for url in page_urls(dead_letter):
        assert client.get(url).status_code == 200, url


def test_live_fragments_answer_htmx_requests_alone(dead_letter: DeadLetter, client_as: Any) -> None:
    client = client_as("viewer")
    fragment = client.get("/?fragment=workflows", headers={"HX-Request": "true"})
    assert fragment.status_code == 200
    assert b"<html" not in fragment.content and b'data-workflow="drill"' in fragment.content
    rows = client.get("/dead-letters/?status=open&view=list", headers={"HX-Request": "true"})
    assert b"<html" not in rows.content and f'data-letter="{dead_letter.pk}"'.encode() in rows.content


def test_viewer_sees_no_action_and_every_action_is_refused(dead_letter: DeadLetter, client_as: Any) -> None:
    client = client_as("viewer")
    assert b"data-action" not in client.get(f"/dead-letters/{dead_letter.pk}/").content
    assert b'name="ids"' not in client.get("/dead-letters/").content
    Run.objects.filter(pk=dead_letter.run_id).update(status="running")
    assert b"data-action" not in client.get(f"/runs/{dead_letter.run_id}/").content
    posts = [
        (f"/dead-letters/{dead_letter.pk}/replay/", {}),
        (f"/dead-letters/{dead_letter.pk}/discard/", {"reason": "x"}),
        ("/dead-letters/bulk/", {"action": "replay", "ids": [dead_letter.pk]}),
        ("/dead-letters/bulk/", {"action": "discard", "ids": [dead_letter.pk], "reason": "x"}),
        (f"/runs/{dead_letter.run_id}/cancel/", {}),
    ]
    for url, data in posts:
        assert client.post(url, data).status_code == 403, url
    dead_letter.refresh_from_db()
    assert dead_letter.status == "open"
    assert not AuditEntry.objects.exists()


def test_actions_need_post_and_csrf(dead_letter: DeadLetter, client_as: Any, role_user: Any) -> None:
    assert client_as("operator").get(f"/dead-letters/{dead_letter.pk}/replay/").status_code == 405
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(role_user("operator", "strict"))
    assert strict.post(f"/dead-letters/{dead_letter.pk}/replay/").status_code == 403


def test_operator_replays_a_letter_and_the_audit_trail_shows_it(
    dead_letter: DeadLetter, client_as: Any
) -> None:
    client = client_as("operator")
    page = client.get(f"/dead-letters/{dead_letter.pk}/")
    assert b'data-action="replay"' in page.content
    response = client.post(f"/dead-letters/{dead_letter.pk}/replay/", follow=True)
    assert b"replayed: run" in response.content
    assert b'data-audit="deadletter.replay"' in response.content
    dead_letter.refresh_from_db()
    assert dead_letter.status == "replayed" and dead_letter.resolved_by.username == "operator"
    again = client.post(f"/dead-letters/{dead_letter.pk}/replay/", follow=True)
    assert b"already replayed" in again.content, "a refused action is a message, not an error page"


def test_operator_replays_a_letter_with_edited_input(dead_letter: DeadLetter, client_as: Any) -> None:
    DeadLetter.objects.filter(pk=dead_letter.pk).update(
        input_snapshot={"input": {"order": 1}, "upstream": {}}
    )
    client = client_as("operator")
    page = client.get(f"/dead-letters/{dead_letter.pk}/")
    assert b'data-action="replay-edited"' in page.content
    assert (
        b'name="input" rows="8" class="code" spellcheck="false" required>{\n  &quot;order&quot;: 1\n}'
        in page.content
    )

    refused = client.post(f"/dead-letters/{dead_letter.pk}/replay/", {"input": "{order: 2"}, follow=True)
    assert b"input is not valid JSON" in refused.content
    dead_letter.refresh_from_db()
    assert dead_letter.status == "open"

    done = client.post(f"/dead-letters/{dead_letter.pk}/replay/", {"input": '{"order": 2}'}, follow=True)
    assert b"with edited input: run" in done.content
    assert NodeRun.objects.get(pk=dead_letter.node_run_id).input_override == {"order": 2}


def test_discard_needs_a_reason(dead_letter: DeadLetter, client_as: Any) -> None:
    client = client_as("operator")
    refused = client.post(f"/dead-letters/{dead_letter.pk}/discard/", {"reason": " "}, follow=True)
    assert b"say why" in refused.content
    client.post(f"/dead-letters/{dead_letter.pk}/discard/", {"reason": "known outage"})
    dead_letter.refresh_from_db()
    assert (dead_letter.status, dead_letter.reason) == ("discarded", "known outage")
    assert AuditEntry.objects.get(action="deadletter.discard").data == {"reason": "known outage"}


def test_replay_matching_shows_the_count_first_then_replays(dead_letter: DeadLetter, client_as: Any) -> None:
    client = client_as("operator")
    confirm = client.post(
        "/dead-letters/bulk/", {"action": "replay", "scope": "matching", "workflow": "drill"}
    )
    assert confirm.status_code == 200 and b"Replay 1 dead letter?" in confirm.content
    dead_letter.refresh_from_db()
    assert dead_letter.status == "open", "nothing happens before the confirmation"
    done = client.post(
        "/dead-letters/bulk/",
        {"action": "replay", "scope": "matching", "workflow": "drill", "confirmed": "1"},
        follow=True,
    )
    assert b"Replayed 1 dead letter" in done.content
    dead_letter.refresh_from_db()
    assert dead_letter.status == "replayed"


def test_replay_matching_asks_again_when_the_count_changed(dead_letter: DeadLetter, client_as: Any) -> None:
    client = client_as("operator")
    stale = client.post("/dead-letters/bulk/", {"action": "replay", "scope": "matching", "confirmed": "7"})
    assert b"Replay 1 dead letter?" in stale.content
    dead_letter.refresh_from_db()
    assert dead_letter.status == "open"


def test_operator_discards_a_selection_with_a_reason(dead_letter: DeadLetter, client_as: Any) -> None:
    client = client_as("operator")
    client.post("/dead-letters/bulk/", {"action": "discard", "ids": [dead_letter.pk], "reason": "duplicate"})
    dead_letter.refresh_from_db()
    assert dead_letter.status == "discarded"


def test_operator_cancels_a_running_run(dead_letter: DeadLetter, client_as: Any) -> None:
    Run.objects.filter(pk=dead_letter.run_id).update(status="running")
    client = client_as("operator")
    assert b'data-action="cancel"' in client.get(f"/runs/{dead_letter.run_id}/").content
    client.post(f"/runs/{dead_letter.run_id}/cancel/", {"reason": "drill"})
    assert Run.objects.get(pk=dead_letter.run_id).status == "cancelled"
    assert AuditEntry.objects.get(action="run.cancel").actor_label == "operator"


def test_runs_list_filters_by_status_and_workflow(dead_letter: DeadLetter, client_as: Any) -> None:
    client = client_as("viewer")
    assert (
        f'data-run="{dead_letter.run_id}"'.encode()
        in client.get("/runs/?status=failed&workflow=drill").content
    )
    assert f'data-run="{dead_letter.run_id}"'.encode() not in client.get("/runs/?status=succeeded").content


def test_output_is_escaped(dead_letter: DeadLetter, client_as: Any) -> None:
    DeadLetter.objects.filter(pk=dead_letter.pk).update(error="<script>alert(1)</script>")
    content = client_as("viewer").get(f"/dead-letters/{dead_letter.pk}/").content
    assert b"<script>alert(1)" not in content and b"&lt;script&gt;" in content


def test_admin_action_replays_selected_letters(dead_letter: DeadLetter, role_user: Any) -> None:
    admin = role_user("admin", "boss")
    admin.is_staff = admin.is_superuser = True
    admin.save()
    client = Client()
    client.force_login(admin)
    url = "/admin/workflows/deadletter/"
    client.post(url, {"action": "discard_letters", "_selected_action": [dead_letter.pk]})
    dead_letter.refresh_from_db()
    assert dead_letter.status == "open", "discarding asks for a reason first"
    client.post(
        url,
        {"action": "discard_letters", "_selected_action": [dead_letter.pk], "confirmed": "1", "reason": "r"},
    )
    dead_letter.refresh_from_db()
    assert dead_letter.status == "discarded"
    assert AuditEntry.objects.get(action="deadletter.discard").actor_label == "boss"


def test_page_admin_and_domain_refuse_a_handled_letter_in_the_same_words(
    dead_letter: DeadLetter, client_as: Any, role_user: Any
) -> None:
    runs.discard_dead_letter(dead_letter.pk, "handled elsewhere")
    domain = deadletters.act_on_letters("replay", [dead_letter.pk])
    [refusal] = domain.refused
    assert (domain.done, refusal["id"]) == ([], dead_letter.pk)
    assert refusal["reason"].startswith(f"Dead letter {dead_letter.pk} was already discarded")

    page = client_as("operator").post("/dead-letters/bulk/", {"action": "replay", "ids": [dead_letter.pk]})
    assert [str(m) for m in get_messages(page.wsgi_request)] == [refusal["reason"]]

    admin = role_user("admin", "boss")
    admin.is_staff = admin.is_superuser = True
    admin.save()
    client = Client()
    client.force_login(admin)
    answer = client.post(
        "/admin/workflows/deadletter/", {"action": "replay_letters", "_selected_action": [dead_letter.pk]}
    )
    said = [str(m) for m in get_messages(answer.wsgi_request)]
    assert said == [refusal["reason"], "Replayed 0 dead letter(s)."]
    assert not AuditEntry.objects.filter(action="deadletter.replay").exists()


@pytest.mark.usefixtures("redis_clean")
def test_the_run_page_says_a_node_is_held_by_its_cap(client_as: Any) -> None:
    workflow = publish("capped", {"nodes": [node("call", "core.noop", max_in_flight=1)]})
    first, second = (runs.start_run(workflow, {})[0] for _ in range(2))
    advancing.advance_runs([first.pk, second.pk])

    viewer = client_as("viewer")
    assert b'data-field="held"' in viewer.get(f"/runs/{second.pk}/").content
    assert b'data-field="held"' not in viewer.get(f"/runs/{first.pk}/").content


def test_runs_list_shows_priorities_and_filters_by_the_least(client_as: Any) -> None:
    workflow = publish("ranked", {"nodes": [node("a")], "edges": []})
    urgent, _ = runs.start_run(workflow, {}, priority=8)
    plain, _ = runs.start_run(workflow, {})
    client = client_as("viewer")
    page = client.get("/runs/?priority=5").content.decode()
    assert f'data-run="{urgent.pk}"' in page and f'data-run="{plain.pk}"' not in page
    assert 'data-field="priority">8<' in page
    everything = client.get("/runs/?priority=not-a-number").content.decode()  # ignored, not a 500
    assert f'data-run="{plain.pk}"' in everything


def test_an_editor_sets_the_default_priority_on_the_schedules_page(client_as: Any) -> None:
    workflow = publish("ranked", {"nodes": [node("a")], "edges": []})
    assert (
        client_as("operator").post("/workflows/ranked/priority/", {"default_priority": "3"}).status_code
        == 403
    )
    editor = client_as("editor")
    editor.post("/workflows/ranked/priority/", {"default_priority": "3"})
    workflow.refresh_from_db()
    assert workflow.default_priority == 3
    response = editor.post("/workflows/ranked/priority/", {"default_priority": "300"}, follow=True)
    assert "from -100 (lowest) to 100" in response.content.decode()
    workflow.refresh_from_db()
    assert workflow.default_priority == 3
