"""Domain calls against real Postgres: validation, idempotency, versions, refusals."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from tests.integration.conftest import node, publish
from workflows.handlers.demo import DEMO_PROFILE
from workflows.runs import actions as runs
from workflows.runtime import advancing, execution
from workflows.store.errors import Conflict, Invalid, NotFound
from workflows.store.models import DeadLetter, NodeRun, Run, Workflow, WorkflowVersion
from workflows.versions import publish as versions

pytestmark = pytest.mark.django_db


def test_unknown_handler_is_refused_naming_the_node_and_nothing_is_written() -> None:
    workflow = versions.create_workflow("bad", "Bad")
    definition = {"nodes": [node("ok"), node("evil", "os.system")]}
    with pytest.raises(Invalid) as caught:
        versions.create_version(workflow, definition)
    paths = [issue.path for issue in caught.value.issues]
    assert paths == ["nodes[1].handler"]
    assert "os.system" in caught.value.issues[0].message
    assert not WorkflowVersion.objects.filter(workflow=workflow).exists()


def test_cycle_is_refused_with_its_path() -> None:
    workflow = versions.create_workflow("loop", "Loop")
    definition = {
        "nodes": [node("a"), node("b"), node("c")],
        "edges": [
            {"source": "a", "target": "b"},
            {"source": "b", "target": "c"},
            {"source": "c", "target": "a"},
        ],
    }
    with pytest.raises(Invalid) as caught:
        versions.create_version(workflow, definition)
    assert any("a -> b -> c -> a" in issue.message for issue in caught.value.issues)


def test_bad_handler_config_names_the_field() -> None:
    workflow = versions.create_workflow("cfg", "Cfg")
    with pytest.raises(Invalid) as caught:
        versions.create_version(workflow, {"nodes": [node("wait", "core.delay", config={"seconds": "soon"})]})
    assert caught.value.issues[0].path.startswith("nodes[0].config")


def test_start_without_an_active_version_is_refused() -> None:
    workflow = versions.create_workflow("empty", "Empty")
    with pytest.raises(Conflict, match="no active version"):
        runs.start_run(workflow, {})


def test_oversized_input_is_refused_and_no_run_is_written(settings) -> None:
    settings.SWITCHYARD = {**settings.SWITCHYARD, "MAX_INPUT_BYTES": 100}
    workflow = publish("demo-profile", DEMO_PROFILE)
    with pytest.raises(Invalid, match="input is .* bytes; the limit is 100 bytes"):
        runs.start_run(workflow, {"blob": "x" * 200})
    assert not Run.objects.exists()


def test_input_must_be_an_object() -> None:
    workflow = publish("demo-profile", DEMO_PROFILE)
    with pytest.raises(Invalid, match="input must be a JSON object"):
        runs.start_run(workflow, ["not", "an", "object"])


def test_idempotent_start_returns_the_same_run_and_refuses_a_different_body() -> None:
    workflow = publish("demo-profile", DEMO_PROFILE)
    first, created = runs.start_run(workflow, {"user_id": "u-1"}, idempotency_key="k-1")
    again, created_again = runs.start_run(workflow, {"user_id": "u-1"}, idempotency_key="k-1")
    assert (created, created_again) == (True, False)
    assert again.pk == first.pk
    with pytest.raises(Conflict, match="k-1"):
        runs.start_run(workflow, {"user_id": "u-2"}, idempotency_key="k-1")
    assert Run.objects.count() == 1
    assert NodeRun.objects.filter(run=first).count() == 4


def test_a_published_version_cannot_be_published_again_and_rollback_activates_an_older_one() -> None:
    workflow = publish("demo-profile", DEMO_PROFILE)
    v1 = workflow.active_version
    with pytest.raises(Conflict, match="already published"):
        versions.publish_version(v1)
    workflow = publish("demo-profile", {"nodes": [node("only")]})
    assert workflow.active_version.number == 2
    versions.activate_version(v1)
    workflow.refresh_from_db()
    assert workflow.active_version_id == v1.pk
    run, _ = runs.start_run(workflow, {})
    assert run.version_id == v1.pk


def test_a_draft_cannot_be_activated() -> None:
    workflow = versions.create_workflow("drafty", "Drafty")
    draft = versions.create_version(workflow, {"nodes": [node("a")]})
    with pytest.raises(Conflict, match="draft"):
        versions.activate_version(draft)


def test_export_then_import_round_trips_the_definition() -> None:
    workflow = publish("demo-profile", DEMO_PROFILE)
    exported = versions.export_workflow(workflow)
    Workflow.objects.filter(pk=workflow.pk).update(slug="renamed")
    imported = versions.import_workflow(exported, publish=True)
    assert imported.workflow.slug == "demo-profile"
    assert imported.checksum == exported["checksum"]
    assert imported.definition == exported["definition"]


def test_unknown_run_and_unknown_dead_letter_are_not_found() -> None:
    with pytest.raises(NotFound, match="No run with id 999999"):
        runs.cancel_run(999999)
    with pytest.raises(NotFound, match="No dead letter with id 999999"):
        runs.replay_dead_letter(999999)


def test_discarding_needs_a_reason() -> None:
    with pytest.raises(Invalid, match="reason"):
        runs.discard_dead_letter(1, "  ")


def test_a_queue_without_workers_is_refused_naming_the_node() -> None:
    workflow = versions.create_workflow("gpu", "Gpu")
    with pytest.raises(Invalid) as caught:
        versions.create_version(workflow, {"nodes": [node("a"), node("b", queue="gpu")]})
    assert [(i.path, "'gpu' has no workers" in i.message) for i in caught.value.issues] == [
        ("nodes[1].queue", True)
    ]


@pytest.mark.django_db(transaction=True)
def test_concurrent_starts_with_one_idempotency_key_make_one_run() -> None:
    workflow = publish("racy", DEMO_PROFILE)
    barrier = threading.Barrier(4)

    def start(_: int) -> int:
        barrier.wait()
        try:
            return runs.start_run(workflow, {"user_id": "u-1"}, idempotency_key="same")[0].pk
        finally:
            connection.close()  # each thread has its own connection

    with ThreadPoolExecutor(4) as pool:
        ids = set(pool.map(start, range(4)))

    assert len(ids) == 1
    assert Run.objects.filter(workflow=workflow).count() == 1
    assert NodeRun.objects.filter(run_id=ids.pop()).count() == 4


def kill_root(run: Run, node_id: str) -> DeadLetter:
    """Fail a run's node and file its dead letter the way the engine does."""
    node_run = NodeRun.objects.get(run=run, node_id=node_id)
    NodeRun.objects.filter(pk=node_run.pk).update(status="failed", tries=1, attempt=1, error="bad input")
    advancing.apply_kills([(node_run.pk, 1)])
    Run.objects.filter(pk=run.pk).update(status="failed")
    return DeadLetter.objects.get(run=run, node_id=node_id)


@pytest.mark.usefixtures("redis_clean")
def test_an_edited_input_is_what_the_workers_claim_gives_the_node_and_what_its_next_letter_shows() -> None:
    workflow = publish("slow-call", {"nodes": [node("call", "core.delay", config={"seconds": 0})]})
    run, _ = runs.start_run(workflow, {"user": 7})

    runs.replay_dead_letter(kill_root(run, "call").pk, edited_input={"user_id": "u-7"})
    advancing.advance_runs([run.pk])  # the scheduler's turn: a job of its own, claimed by the worker
    call = NodeRun.objects.get(run=run, node_id="call")
    [claim], _ = execution.claim([(call.pk, call.attempt, run.version_id, "call")], "worker-t")

    assert claim.input == {"user_id": "u-7"}
    NodeRun.objects.filter(pk=call.pk).update(status="failed", tries=1)
    advancing.apply_kills([(call.pk, 1)])
    letter = DeadLetter.objects.filter(run=run).latest("id")
    assert letter.input_snapshot["input"] == {"user_id": "u-7"} and letter.input_snapshot["edited"] is True


@pytest.mark.parametrize("edited", [[1], "x", 3])
def test_an_edited_input_that_is_not_an_object_is_refused_and_nothing_is_replayed(edited: object) -> None:
    run, _ = runs.start_run(publish("refused-edit", {"nodes": [node("a")]}), {})
    letter = kill_root(run, "a")
    with pytest.raises(Invalid, match="input must be a JSON object"):
        runs.replay_dead_letter(letter.pk, edited_input=edited)
    letter.refresh_from_db()
    assert letter.status == "open" and NodeRun.objects.get(run=run).status == "dead"
