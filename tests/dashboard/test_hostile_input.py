"""Text PostgreSQL cannot store, and JSON nested too deep, sent to the pages: 400 naming the
field (or a refusal naming it), never a 500, and nothing stored."""

from __future__ import annotations

from typing import Any

import pytest

from workflows.store.models import AuditEntry, DeadLetter, NodeRun, Run

NUL = "before\x00after"
DEEP = "[" * 1000 + "]" * 1000


def assert_refused(response: Any, field: str) -> None:
    assert response.status_code == 400, response.content
    assert response.content.decode().startswith(f"{field} contains a NUL character")


def test_a_nul_in_a_cancel_reason_is_400_and_the_run_goes_on(dead_letter: DeadLetter, client_as: Any) -> None:
    Run.objects.filter(pk=dead_letter.run_id).update(status="running")
    response = client_as("operator").post(f"/runs/{dead_letter.run_id}/cancel/", {"reason": NUL})
    assert_refused(response, "reason")
    assert Run.objects.get(pk=dead_letter.run_id).status == "running"


def test_a_nul_in_a_discard_reason_is_400_and_the_letter_stays_open(
    dead_letter: DeadLetter, client_as: Any
) -> None:
    assert_refused(
        client_as("operator").post(f"/dead-letters/{dead_letter.pk}/discard/", {"reason": NUL}), "reason"
    )
    dead_letter.refresh_from_db()
    assert dead_letter.status == "open" and not AuditEntry.objects.exists()


def test_a_nul_in_a_bulk_reason_or_filter_is_400(dead_letter: DeadLetter, client_as: Any) -> None:
    client = client_as("admin")
    body = {"action": "discard", "reason": NUL, "ids": [str(dead_letter.pk)]}
    assert_refused(client.post("/dead-letters/bulk/", body), "reason")
    body = {"action": "discard", "reason": "ok", "scope": "matching", "node": NUL}
    assert_refused(client.post("/dead-letters/bulk/", body), "node")
    assert DeadLetter.objects.get(pk=dead_letter.pk).status == "open"


@pytest.mark.parametrize(
    ("url", "field"),
    [
        ("/runs/?workflow=a%00b", "workflow"),
        ("/runs/?status=%00", "status"),
        ("/dead-letters/?node=a%00b", "node"),
        ("/dead-letters/?workflow=%00", "workflow"),
        ("/runs/?a%00=1", "(a field name)"),
        ("/workflows/drill/live/nodes/a%00b/", "path"),
    ],
)
def test_a_nul_in_a_pages_query_or_path_is_400(
    dead_letter: DeadLetter, client_as: Any, url: str, field: str
) -> None:
    assert_refused(client_as("viewer").get(url), field)


def test_a_nul_in_a_run_node_path_is_400(dead_letter: DeadLetter, client_as: Any) -> None:
    assert_refused(client_as("viewer").get(f"/runs/{dead_letter.run_id}/nodes/bo%00om/"), "path")


@pytest.mark.parametrize(
    ("edited", "says"),
    [
        (NUL, None),  # a NUL typed into the field: refused before the view
        ('{"order": "a\\u0000b"}', b"input.order must not contain NUL"),
        ('{"order": "\\ud800"}', b"input.order must not contain NUL"),
        (DEEP, b"input is not valid JSON: nested too deeply"),
    ],
)
def test_a_replay_with_unstorable_or_too_deep_input_replays_nothing(
    dead_letter: DeadLetter, client_as: Any, edited: str, says: bytes | None
) -> None:
    response = client_as("operator").post(
        f"/dead-letters/{dead_letter.pk}/replay/", {"input": edited}, follow=True
    )
    if says is None:
        assert_refused(response, "input")
    else:
        assert response.status_code == 200 and says in response.content
    dead_letter.refresh_from_db()
    assert dead_letter.status == "open"
    assert NodeRun.objects.get(pk=dead_letter.node_run_id).input_override is None
