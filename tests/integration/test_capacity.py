"""Per-node limits, concurrency caps and rate limits (workflows/runtime/capacity.py), against real
PostgreSQL and Redis; the scheduler's steps are called in this process, by two threads where
two schedulers race."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from django.utils import timezone

from tests.integration.conftest import node, publish
from workflows.runs import actions as runs
from workflows.runtime import advancing, reconciler
from workflows.store.models import NodeRun, Run, Workflow

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("redis_clean", "lone_starts")]


def capped(cap: int) -> Workflow:
    return publish("capped", {"nodes": [node("call", "core.noop", max_in_flight=cap)]})


def statuses(started: list[Run]) -> list[str]:
    by_run = dict(NodeRun.objects.filter(run__in=started).values_list("run_id", "status"))
    return [by_run[run.pk] for run in started]


def test_ready_nodes_beyond_the_cap_are_held_then_admitted_oldest_first_as_places_free() -> None:
    workflow = capped(1)
    started = [runs.start_run(workflow, {})[0] for _ in range(3)]
    assert statuses(started) == ["pending"] * 3, "a capped root is left to a scheduler"

    advancing.advance_runs([run.pk for run in started])
    assert statuses(started) == ["queued", "pending", "pending"]
    held = NodeRun.objects.filter(run__in=started[1:])
    assert all(n.due_at is not None for n in held), "the held nodes are marked for housekeeping"

    assert advancing.enqueue_due(workers=1) == 2
    assert statuses(started) == ["queued", "pending", "pending"], "no place is free yet"

    NodeRun.objects.filter(run=started[0]).update(status="succeeded")
    advancing.enqueue_due(workers=1)
    assert statuses(started) == ["succeeded", "queued", "pending"]
    assert NodeRun.objects.get(run=started[1]).due_at is None


def test_an_attempt_keeps_its_place_while_it_waits_so_its_resumption_stays_within_the_cap() -> None:
    """As an agent parked on a workflow tool's child run, then resumed (same attempt)."""
    workflow = capped(1)
    first, second = (runs.start_run(workflow, {})[0] for _ in range(2))
    advancing.advance_runs([first.pk, second.pk])
    NodeRun.objects.filter(run=first).update(status="waiting")  # parked

    advancing.enqueue_due(workers=1)
    assert statuses([first, second]) == ["waiting", "pending"], "the waiting attempt holds the place"

    NodeRun.objects.filter(run=first).update(status="queued")  # resumed: needs no new place
    advancing.enqueue_due(workers=1)
    assert statuses([first, second]) == ["queued", "pending"]

    NodeRun.objects.filter(run=first).update(status="succeeded")
    advancing.enqueue_due(workers=1)
    assert statuses([first, second]) == ["succeeded", "queued"]


def test_the_cap_counts_every_run_of_the_workflow_across_versions() -> None:
    first = capped(2)
    old = [runs.start_run(first, {})[0] for _ in range(2)]
    advancing.advance_runs([run.pk for run in old])
    new = runs.start_run(capped(2), {})[0]  # a second version, same node
    assert new.version_id != old[0].version_id

    advancing.advance_runs([new.pk])

    assert statuses([*old, new]) == ["queued", "queued", "pending"]


def test_two_schedulers_admitting_at_once_stay_within_the_cap() -> None:
    """Each scheduler decides other runs: unlocked, both would count two free places."""
    workflow = capped(2)
    started = [runs.start_run(workflow, {})[0] for _ in range(8)]
    barrier = threading.Barrier(2)
    failures: list[BaseException] = []

    def scheduler(share: list[Run]) -> None:
        try:
            barrier.wait()
            advancing.advance_runs([run.pk for run in share])
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=scheduler, args=(share,)) for share in (started[:4], started[4:])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert failures == []
    assert statuses(started).count("queued") == 2


def test_a_long_queue_behind_one_capped_node_does_not_starve_another() -> None:
    busy = capped(1)
    behind = [runs.start_run(busy, {})[0] for _ in range(4)]
    advancing.advance_runs([run.pk for run in behind])  # one queued, three held (the oldest)
    other = publish("other", {"nodes": [node("call", "core.noop", max_in_flight=1)]})
    late = runs.start_run(other, {})[0]
    NodeRun.objects.filter(run=late).update(due_at=timezone.now())  # held, its place since freed

    advancing.enqueue_due(workers=1, limit=2, per_node=1)

    assert statuses([*behind, late]) == ["queued", "pending", "pending", "pending", "queued"]


def test_the_reconciler_leaves_a_held_run_to_housekeeping(settings) -> None:
    settings.SWITCHYARD = {**settings.SWITCHYARD, "RECONCILE_AFTER_SECONDS": 0.0}
    workflow = capped(1)
    started = [runs.start_run(workflow, {})[0] for _ in range(2)]
    advancing.advance_runs([run.pk for run in started])  # the second is held
    NodeRun.objects.filter(run=started[0]).update(status="succeeded", finished_at=timezone.now())
    Run.objects.filter(pk=started[0].pk).update(status="succeeded")

    assert reconciler.Reconciler().redrive_stalled_runs(workers=1) == 0


def test_a_rate_limited_node_starts_at_most_its_count_per_window_then_waits() -> None:
    workflow = publish(
        "rated", {"nodes": [node("call", "core.noop", rate_limit={"count": 2, "per_seconds": 60})]}
    )
    started = [runs.start_run(workflow, {})[0] for _ in range(3)]
    assert statuses(started) == ["pending"] * 3, "a rate-limited root is left to a scheduler"

    advancing.advance_runs([run.pk for run in started])
    assert statuses(started) == ["queued", "queued", "pending"]

    NodeRun.objects.filter(run__in=started[:2]).update(status="succeeded")  # finished: still counted
    advancing.enqueue_due(workers=1)
    assert statuses(started) == ["succeeded", "succeeded", "pending"], "the window is not over"
