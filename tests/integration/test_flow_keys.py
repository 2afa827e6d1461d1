"""Concurrency keys at admission (workflows/runtime/flowkeys.py, capacity.py), debounce and
singleton on starts (workflows/runs/startkeys.py), against real PostgreSQL and Redis; the
scheduler's steps are called in this process. The runs with real workers and schedulers are
in test_flow_control_runtime.py."""

from __future__ import annotations

import pytest
from django.utils import timezone

from tests.integration.conftest import node, publish
from workflows.runs import actions as runs, startkeys
from workflows.runtime import advancing
from workflows.store.models import NodeRun, Run, Workflow

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("redis_clean", "lone_starts")]


def keyed(limit: int, slug: str = "keyed", **flow: object) -> Workflow:
    return publish(
        slug,
        {
            "nodes": [node("call", "core.noop", concurrency={"key": "input.customer", "limit": limit})],
            **flow,
        },
    )


def status_of(run: Run) -> str:
    return NodeRun.objects.get(run=run).status


def test_at_most_limit_attempts_per_key_are_admitted_and_other_keys_are_not_held() -> None:
    workflow = keyed(1)
    big = [runs.start_run(workflow, {"customer": "big"})[0] for _ in range(3)]
    small = runs.start_run(workflow, {"customer": "small"})[0]

    advancing.advance_runs([run.pk for run in [*big, small]])

    assert [status_of(run) for run in big] == ["queued", "pending", "pending"]
    assert status_of(small) == "queued", "another key's run is not held behind the big key"
    assert NodeRun.objects.get(run=big[1]).flow_key == "call:big"


def test_a_freed_place_admits_the_next_run_of_that_key() -> None:
    workflow = keyed(1)
    first, second = (runs.start_run(workflow, {"customer": "c"})[0] for _ in range(2))
    advancing.advance_runs([first.pk, second.pk])
    NodeRun.objects.filter(run=first).update(status="succeeded")

    advancing.enqueue_due(workers=1)

    assert status_of(second) == "queued"


def test_held_runs_are_offered_in_turns_between_keys_so_a_big_key_cannot_take_the_offer() -> None:
    workflow = keyed(1)
    big = [runs.start_run(workflow, {"customer": "big"})[0] for _ in range(6)]
    small = [runs.start_run(workflow, {"customer": "small"})[0] for _ in range(2)]
    advancing.advance_runs([run.pk for run in [*big, *small]])
    NodeRun.objects.filter(run__in=[big[0], small[0]]).update(status="succeeded")

    advancing.enqueue_due(workers=1, limit=2)  # an offer of two: one turn per key

    assert status_of(small[1]) == "queued"
    assert [status_of(run) for run in big[1:]].count("queued") == 1


def test_a_workflow_wide_key_counts_every_node_of_its_runs() -> None:
    workflow = publish(
        "wide",
        {
            "nodes": [node("a"), node("b")],
            "edges": [],
            "concurrency": {"key": "input.customer", "limit": 1},
        },
    )
    run = runs.start_run(workflow, {"customer": "c"})[0]
    advancing.advance_runs([run.pk])
    assert sorted(NodeRun.objects.filter(run=run).values_list("status", flat=True)) == ["pending", "queued"]
    assert set(NodeRun.objects.filter(run=run).values_list("flow_key", flat=True)) == {"*:c"}


def test_a_run_whose_key_does_not_resolve_takes_the_declared_default() -> None:
    workflow = publish(
        "defaulted",
        {"nodes": [node("call", concurrency={"key": "input.customer", "limit": 1, "default": "anon"})]},
    )
    run = runs.start_run(workflow, {})[0]
    advancing.advance_runs([run.pk])
    assert NodeRun.objects.get(run=run).flow_key == "call:anon"


def test_a_debounced_start_replaces_the_waiting_one_and_starts_when_its_window_ends() -> None:
    workflow = keyed(5, "debounced", debounce={"key": "input.customer", "window_s": 60})
    first = runs.start_run(workflow, {"customer": "c", "n": 1})[0]
    second = runs.start_run(workflow, {"customer": "c", "n": 2})[0]
    other = runs.start_run(workflow, {"customer": "d"})[0]
    first.refresh_from_db()

    assert first.status == "cancelled"
    assert first.events.filter(
        kind="run.cancelled", data__reason=f"debounced: replaced by run {second.pk}"
    ).exists()
    assert Run.objects.get(pk=second.pk).status == "waiting"
    assert Run.objects.get(pk=other.pk).status == "waiting", "another key is not replaced"

    assert startkeys.start_deferred() == 0, "the window has not ended"
    Run.objects.filter(pk=second.pk).update(start_due_at=timezone.now())
    assert startkeys.start_deferred() == 1
    assert Run.objects.get(pk=second.pk).status == "running"


def test_a_singleton_skip_refuses_a_start_while_its_key_is_active() -> None:
    workflow = keyed(5, "single", singleton={"key": "input.order", "mode": "skip"})
    first = runs.start_run(workflow, {"order": "o1"})[0]
    with pytest.raises(startkeys.SingletonActive) as refused:
        runs.start_run(workflow, {"order": "o1"})
    assert refused.value.run_id == first.pk
    assert runs.start_run(workflow, {"order": "o2"})[1] is True, "another key starts"


def test_a_singleton_queue_start_waits_until_the_active_run_ends() -> None:
    workflow = keyed(5, "queued", singleton={"key": "input.order", "mode": "queue"})
    first = runs.start_run(workflow, {"order": "o1"})[0]
    second = runs.start_run(workflow, {"order": "o1"})[0]
    third = runs.start_run(workflow, {"order": "o1"})[0]
    assert (first.status, second.status, third.status) == ("running", "waiting", "waiting")

    assert startkeys.start_deferred() == 0
    Run.objects.filter(pk=first.pk).update(status="succeeded")
    assert startkeys.start_deferred() == 1
    assert [Run.objects.get(pk=r.pk).status for r in (second, third)] == ["running", "waiting"]
