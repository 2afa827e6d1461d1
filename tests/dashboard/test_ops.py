"""Runs search and bulk actions, dead-letter groups and bulk, re-run from a node: pages and domain.

Rows are made directly (no workers): these tests are about finding, grouping and acting,
which read and write PostgreSQL only; the runtime's part of a re-run is in the browser test.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.integration.conftest import node, publish
from workflows.core.signatures import error_signature
from workflows.runs import (
    actions as runs,
    bulk as runbulk,
    letters as deadletters,
    rerun as reruns,
    search as runsearch,
)
from workflows.store.errors import Conflict, Invalid
from workflows.store.models import AuditEntry, DeadLetter, NodeRun, Run, RunEvent

pytestmark = pytest.mark.django_db
CHAIN = {
    "nodes": [node("a"), node("b"), node("c")],
    "edges": [{"source": "a", "target": "b"}, {"source": "b", "target": "c"}],
}


@pytest.fixture
def chain(redis_clean: None) -> Any:
    return publish("chain", CHAIN)


def finished_run(workflow: Any, run_input: dict[str, Any], status: str = "succeeded") -> Run:
    run, _ = runs.start_run(workflow, run_input)
    NodeRun.objects.filter(run=run).update(status="succeeded", attempt=1, tries=1)
    NodeRun.objects.filter(run=run, node_id="a").update(output={"from": "a"})
    Run.objects.filter(pk=run.pk).update(status=status)
    run.refresh_from_db()
    return run


def failed_run(workflow: Any, run_input: dict[str, Any], error: str, node_id: str = "b") -> DeadLetter:
    run = finished_run(workflow, run_input, status="failed")
    dead = NodeRun.objects.get(run=run, node_id=node_id)
    NodeRun.objects.filter(pk=dead.pk).update(status="dead", error=error)
    NodeRun.objects.filter(run=run, node_id="c").update(status="upstream_failed")
    return DeadLetter.objects.create(
        run=run, node_run=dead, node_id=node_id, attempt=1, error=error, signature=error_signature(error)
    )


def row_ids(html: str, attr: str = "data-run") -> list[int]:
    return [int(x) for x in re.findall(rf'{attr}="(\d+)"', html)]


# --------------------------------------------------------------------------- search


def test_input_terms_become_one_containment_document() -> None:
    found = runsearch.parse_input_terms('input.customer=acme, order.total=12 order.rush=true tag="7"')
    assert found == {"customer": "acme", "order": {"total": 12, "rush": True}, "tag": "7"}


def test_a_term_without_a_value_is_refused_naming_it() -> None:
    with pytest.raises(Invalid, match="'customer' is not a search term"):
        runsearch.parse_input_terms("customer")


def test_runs_page_finds_a_run_by_an_input_value(chain: Any, client_as: Any) -> None:
    wanted, _ = runs.start_run(chain, {"customer": "acme", "order": {"total": 12}})
    runs.start_run(chain, {"customer": "globex", "order": {"total": 12}})
    page = client_as("viewer").get("/runs/", {"input": "customer=acme order.total=12"})
    assert page.status_code == 200
    assert row_ids(page.content.decode()) == [wanted.pk]


def test_runs_page_refuses_a_bad_input_term_with_400_naming_it(chain: Any, client_as: Any) -> None:
    page = client_as("viewer").get("/runs/", {"input": "customer"})
    assert page.status_code == 400
    assert "is not a search term" in page.content.decode()


def test_runs_are_found_by_error_text_and_failing_node_shown_in_columns(chain: Any, client_as: Any) -> None:
    letter = failed_run(chain, {"n": 1}, "HTTP 503 from upstream after 2 s")
    failed_run(chain, {"n": 2}, "KeyError: 'user'", node_id="a")
    page = client_as("viewer").get("/runs/", {"error": "http 503", "node": "b"}).content.decode()
    assert row_ids(page) == [letter.run_id]
    assert 'data-field="failing-node"' in page and ">b</a>" in page
    assert "HTTP 503 from upstream" in page


def test_run_pages_go_both_ways_with_keysets(chain: Any, client_as: Any) -> None:
    made = [runs.start_run(chain, {"i": i})[0].pk for i in range(120)]
    client = client_as("viewer")
    first = client.get("/runs/", {"workflow": "chain"}).content.decode()
    assert row_ids(first) == made[::-1][:50]
    older = re.search(r'data-action="older" href="[^"]*before=(\d+)', first)
    assert older and 'data-action="newer"' not in first
    second = client.get("/runs/", {"workflow": "chain", "before": older.group(1)}).content.decode()
    assert row_ids(second) == made[::-1][50:100]
    newer = re.search(r'data-action="newer" href="[^"]*after=(\d+)', second)
    assert newer
    back = client.get("/runs/", {"workflow": "chain", "after": newer.group(1)}).content.decode()
    assert row_ids(back) == made[::-1][:50]


# --------------------------------------------------------------------------- bulk runs


def test_cancel_all_matching_shows_the_count_then_cancels_and_audits(chain: Any, client_as: Any) -> None:
    acme = [runs.start_run(chain, {"customer": "acme", "i": i})[0].pk for i in range(3)]
    other, _ = runs.start_run(chain, {"customer": "globex"})
    client = client_as("operator")
    form = {"do": "cancel-matching", "input": "customer=acme", "reason": "bad batch"}
    confirm = client.post("/runs/bulk/", form)
    assert confirm.status_code == 200 and "Cancel 3 runs?" in confirm.content.decode()
    done = client.post("/runs/bulk/", {**form, "confirmed": "3"})
    assert done.status_code == 302
    assert set(Run.objects.filter(pk__in=acme).values_list("status", flat=True)) == {"cancelled"}
    assert Run.objects.get(pk=other.pk).status == "running"
    assert AuditEntry.objects.filter(action="run.cancel", target_id__in=[str(i) for i in acme]).count() == 3


def test_a_viewer_may_not_bulk_cancel(chain: Any, client_as: Any) -> None:
    run, _ = runs.start_run(chain, {})
    response = client_as("viewer").post("/runs/bulk/", {"do": "cancel-selected", "ids": [run.pk]})
    assert response.status_code == 403
    assert Run.objects.get(pk=run.pk).status == "running"


def test_bulk_replay_replays_open_letters_and_refuses_runs_without_one(chain: Any) -> None:
    letter = failed_run(chain, {"n": 1}, "boom")
    plain = finished_run(chain, {"n": 2})
    result = runbulk.act_on_runs("replay", [letter.run_id, plain.pk])
    assert result.done == [letter.run_id]
    assert result.refused == [
        {"id": plain.pk, "reason": f"Run {plain.pk} has no open dead letter: nothing to replay."}
    ]
    assert DeadLetter.objects.get(pk=letter.pk).status == "replayed"


# --------------------------------------------------------------------------- dead letters


def test_letters_differing_in_numbers_and_ids_fall_in_one_group(chain: Any) -> None:
    for user in (4411, 4412, 4413):
        failed_run(chain, {"u": user}, f"HTTP 503 from https://x/users/{user} after 2.{user} s")
    failed_run(chain, {"u": 1}, "KeyError: 'user'", node_id="a")
    groups = deadletters.groups(deadletters.LetterFilter())
    assert [(g.node_id, g.signature, g.count) for g in groups] == [
        ("b", "HTTP <n> from https://x/users/<n> after <n> s", 3),
        ("a", "KeyError: '…'", 1),
    ]
    assert groups[0].first_seen <= groups[0].last_seen


def test_discard_all_matching_of_a_group_needs_a_reason_then_a_count(chain: Any, client_as: Any) -> None:
    group = [failed_run(chain, {"u": u}, f"timeout after {u} s").pk for u in (1, 2)]
    other = failed_run(chain, {"u": 3}, "KeyError: 'x'").pk
    client = client_as("operator")
    form = {
        "action": "discard",
        "scope": "matching",
        "workflow": "chain",
        "node": "b",
        "signature": "timeout after <n> s",
        "view": "list",
    }
    refused = client.post("/dead-letters/bulk/", form)
    assert refused.status_code == 400 and "Discarding needs a reason" in refused.content.decode()
    confirm = client.post("/dead-letters/bulk/", {**form, "reason": "upstream fixed"})
    assert "Discard 2 dead letters?" in confirm.content.decode()
    client.post("/dead-letters/bulk/", {**form, "reason": "upstream fixed", "confirmed": "2"})
    assert set(DeadLetter.objects.filter(pk__in=group).values_list("status", flat=True)) == {"discarded"}
    assert DeadLetter.objects.get(pk=other).status == "open"


def test_a_refused_discard_keeps_the_selection(chain: Any, client_as: Any) -> None:
    letters = [failed_run(chain, {"u": u}, "boom").pk for u in range(3)]
    page = client_as("operator").post(
        "/dead-letters/bulk/", {"action": "discard", "ids": letters[:2], "view": "list"}
    )
    html = page.content.decode()
    assert page.status_code == 400 and "Your selection is kept" in html
    checked = re.findall(r'name="ids" value="(\d+)"[^>]*checked', html)
    assert sorted(map(int, checked)) == sorted(letters[:2])
    assert set(DeadLetter.objects.values_list("status", flat=True)) == {"open"}


def test_the_old_deadletters_path_answers(client_as: Any) -> None:
    response = client_as("viewer").get("/deadletters/?workflow=x")
    assert response.status_code == 302 and response["Location"] == "/dead-letters/?workflow=x"


def test_replay_outcome_names_the_attempts_since_and_a_new_letter(chain: Any) -> None:
    letter = failed_run(chain, {"n": 1}, "boom")
    runs.replay_dead_letter(letter.pk)
    RunEvent.objects.create(
        run_id=letter.run_id,
        kind="node.attempt",
        node_id="b",
        attempt=2,
        at=letter.created_at,
        data={"status": "failed"},
    )
    newer = DeadLetter.objects.create(
        run_id=letter.run_id, node_run=letter.node_run, node_id="b", attempt=2, error="boom"
    )
    outcome = deadletters.replay_outcome(DeadLetter.objects.get(pk=letter.pk))
    assert [a["attempt"] for a in outcome.attempts] == [2]
    assert outcome.new_letter is not None and outcome.new_letter.pk == newer.pk


# --------------------------------------------------------------------------- re-run


def test_rerun_from_a_node_resets_it_and_below_and_keeps_the_outputs_above(chain: Any) -> None:
    run = finished_run(chain, {"n": 1})
    assert reruns.rerun_from_node(run.pk, "b") == ["b", "c"]
    states = dict(NodeRun.objects.filter(run=run).values_list("node_id", "status"))
    assert states == {"a": "succeeded", "b": "pending", "c": "pending"}
    assert NodeRun.objects.get(run=run, node_id="a").output == {"from": "a"}
    run.refresh_from_db()
    assert run.status == "running" and run.epoch == 1
    assert AuditEntry.objects.filter(action="run.rerun", target_id=str(run.pk)).exists()
    assert RunEvent.objects.filter(run=run, kind="run.rerun", node_id="b").exists()


def test_rerun_closes_the_open_letter_of_a_rerun_node(chain: Any) -> None:
    letter = failed_run(chain, {"n": 1}, "boom")
    reruns.rerun_from_node(letter.run_id, "a")
    assert DeadLetter.objects.get(pk=letter.pk).status == "replayed"


def test_a_running_run_cannot_be_rerun(chain: Any) -> None:
    run, _ = runs.start_run(chain, {})
    with pytest.raises(Conflict, match="only a succeeded or failed run"):
        reruns.rerun_from_node(run.pk, "a")


def test_rerun_page_action_is_for_operators(chain: Any, client_as: Any) -> None:
    run = finished_run(chain, {})
    assert client_as("viewer").post(f"/runs/{run.pk}/rerun/", {"node": "b"}).status_code == 403
    assert client_as("operator").post(f"/runs/{run.pk}/rerun/", {"node": "b"}).status_code == 302
    assert NodeRun.objects.get(run=run, node_id="b").status == "pending"


def test_run_page_shows_output_and_attempt_logs(chain: Any, client_as: Any) -> None:
    run = finished_run(chain, {})
    NodeRun.objects.filter(run=run, node_id="c").update(output={"total": 3})
    RunEvent.objects.create(
        run=run,
        kind="node.attempt",
        node_id="c",
        attempt=1,
        at=run.created_at,
        started_at=run.created_at,
        data={"status": "succeeded", "log": "INFO hello from c\n"},
    )
    client = client_as("viewer")
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'data-field="output"' in page and "&quot;total&quot;: 3" in page
    panel = client.get(f"/runs/{run.pk}/nodes/c/").content.decode()
    assert "INFO hello from c" in panel


@pytest.mark.parametrize("query", ["input=a%3D%00", "error=%00", "node=%00"])
def test_runs_page_refuses_text_postgres_cannot_hold(query: str, client_as: Any) -> None:
    assert client_as("viewer").get(f"/runs/?{query}").status_code == 400
