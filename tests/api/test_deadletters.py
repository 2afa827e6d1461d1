"""Dead letters through the API: read, replay, discard, in bulk with a dry run; all audited."""

from __future__ import annotations

import pytest

from tests.api.conftest import assert_problem, dead_letter
from workflows.store.models import AuditEntry, DeadLetter, NodeRun

pytestmark = pytest.mark.django_db


def test_a_dead_letter_reads_with_its_snapshot_and_attempts(api, chain) -> None:
    run = dead_letter(chain, run_input={"user": "u-9"})
    listed = api.get("deadletters").json()["items"]
    assert len(listed) == 1 and listed[0]["run"] == run.pk and listed[0]["workflow"] == "chain"
    letter = api.get(f"deadletters/{listed[0]['id']}").json()
    assert letter["node_id"] == "first" and letter["error"] == "boom: it broke"
    assert letter["input_snapshot"]["input"] == {"user": "u-9"} and letter["status"] == "open"
    assert letter["attempts"] == []
    assert api.get(f"runs/{run.pk}").json()["dead_letters"] == [letter["id"]]


def test_list_filters(api, chain) -> None:
    first = dead_letter(chain)
    dead_letter(chain, node_id="second")
    assert len(api.get("deadletters", run=first.pk).json()["items"]) == 1
    assert len(api.get("deadletters", node_id="second").json()["items"]) == 1
    assert len(api.get("deadletters", status="open", workflow="chain").json()["items"]) == 2
    assert api.get("deadletters", status="discarded").json()["items"] == []
    # A letter its run's saga closed (runtime/compensations.py) is found by its own status.
    DeadLetter.objects.filter(run=first).update(status=DeadLetter.COMPENSATED)
    compensated = api.get("deadletters", status="compensated").json()["items"]
    assert [item["run"] for item in compensated] == [first.pk]
    assert len(api.get("deadletters", status="open").json()["items"]) == 1
    assert_problem(api.get("deadletters", run="x"), 400, "run")


def test_replay_puts_the_run_back_to_running_once(api, chain) -> None:
    run = dead_letter(chain)
    letter_id = DeadLetter.objects.get(run=run).pk
    replayed = api.post(f"deadletters/{letter_id}/replay")
    assert replayed.status_code == 200 and replayed.json()["status"] == "running"
    assert NodeRun.objects.get(run=run, node_id="first").status == "pending"
    assert "already replayed" in assert_problem(api.post(f"deadletters/{letter_id}/replay"), 409)["detail"]
    entry = AuditEntry.objects.get(action="deadletter.replay")
    assert entry.actor_label.startswith("api key sy_") and entry.target_id == str(letter_id)


def test_replay_with_edited_input_gives_it_to_the_node_only(api, chain) -> None:
    run = dead_letter(chain, run_input={"user": 7})
    letter_id = DeadLetter.objects.get(run=run).pk
    for bad, field in (([1, 2], "input"), ("text", "input")):
        assert_problem(api.post(f"deadletters/{letter_id}/replay", {"input": bad}), 422, field)
    assert DeadLetter.objects.get(pk=letter_id).status == "open"  # refused: nothing replayed

    assert api.post(f"deadletters/{letter_id}/replay", {"input": {"user_id": "u-7"}}).status_code == 200

    first = NodeRun.objects.get(run=run, node_id="first")
    assert first.input_override == {"user_id": "u-7"} and first.run.input == {"user": 7}
    entry = AuditEntry.objects.get(action="deadletter.replay")
    assert entry.data["edited_input"] == {"user_id": "u-7"}


def test_replay_with_an_input_over_the_limit_is_refused(api, chain, settings) -> None:
    settings.SWITCHYARD = {**settings.SWITCHYARD, "MAX_INPUT_BYTES": 64}
    letter_id = DeadLetter.objects.get(run=dead_letter(chain)).pk
    refused = assert_problem(api.post(f"deadletters/{letter_id}/replay", {"input": {"x": "y" * 100}}), 422)
    assert "limit is 64 bytes" in refused["detail"]
    assert DeadLetter.objects.get(pk=letter_id).status == "open"


def test_discard_needs_a_reason_and_keeps_it(api, chain) -> None:
    letter_id = DeadLetter.objects.get(run=dead_letter(chain)).pk
    assert_problem(api.post(f"deadletters/{letter_id}/discard", {}), 422, "reason")
    assert_problem(api.post(f"deadletters/{letter_id}/discard", {"reason": "   "}), 422, "reason")
    discarded = api.post(f"deadletters/{letter_id}/discard", {"reason": "customer deleted"}).json()
    assert (discarded["status"], discarded["reason"]) == ("discarded", "customer deleted")
    assert AuditEntry.objects.get(action="deadletter.discard").data == {"reason": "customer deleted"}
    assert_problem(api.post(f"deadletters/{letter_id}/discard", {"reason": "again"}), 409)
    assert_problem(api.post("deadletters/424242/discard", {"reason": "x"}), 404)


def test_bulk_replay_counts_first_then_replays(api, chain) -> None:
    runs = [dead_letter(chain) for _ in range(3)]
    dead_letter(chain, node_id="second")
    dry = api.post("deadletters/replay", {"filter": {"node_id": "first"}, "dry_run": True}).json()
    assert (dry["matched"], dry["done"], dry["dry_run"]) == (3, [], True) and len(dry["sample"]) == 3
    assert DeadLetter.objects.filter(status="open").count() == 4
    done = api.post(
        "deadletters/replay", {"filter": {"node_id": "first"}, "dry_run": False, "limit": 2}
    ).json()
    assert done["matched"] == 3 and len(done["done"]) == 2 and done["refused"] == []
    assert DeadLetter.objects.filter(status="replayed").count() == 2
    assert AuditEntry.objects.filter(action="deadletter.replay").count() == 2
    assert {r.pk for r in runs} >= set(
        DeadLetter.objects.filter(status="replayed").values_list("run_id", flat=True)
    )
    assert_problem(api.post("deadletters/replay", {"filter": {}}), 422, "dry_run")


def test_bulk_replay_reports_letters_it_may_not_replay(api, chain) -> None:
    run = dead_letter(chain)
    api.post(f"runs/{run.pk}/cancel", {})  # a failed run cannot be cancelled ...
    run.status = "cancelled"
    run.save(update_fields=["status"])  # ... so cancel it behind the API's back
    result = api.post("deadletters/replay", {"dry_run": False}).json()
    assert result["done"] == [] and "cancelled" in result["refused"][0]["reason"]


def test_bulk_discard_needs_a_reason(api, chain) -> None:
    dead_letter(chain)
    assert_problem(api.post("deadletters/discard", {"dry_run": False}), 422, "reason")
    result = api.post("deadletters/discard", {"dry_run": False, "reason": "test data"}).json()
    assert len(result["done"]) == 1 and DeadLetter.objects.get().reason == "test data"


def test_an_operator_replays_but_a_viewer_may_not(api_as, chain) -> None:
    letter_id = DeadLetter.objects.get(run=dead_letter(chain)).pk
    assert_problem(api_as("viewer", "read", "operate").post(f"deadletters/{letter_id}/replay"), 403)
    assert api_as("operator", "operate").post(f"deadletters/{letter_id}/replay").status_code == 200
