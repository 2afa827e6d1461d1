"""Map items the reconciler fails: handed back by a stopping worker (not counted), or overdue
under a live worker (counted, as a task attempt's hang). Driven on the statements, so each
bound is exact; the process-level checks are in test_map_slots.py and test_maps.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.integration.conftest import node, publish
from workflows.runs import actions as runs
from workflows.runtime import mapping
from workflows.runtime.advancing import advance_runs
from workflows.store.models import MapItem

pytestmark = pytest.mark.django_db


def running_item(started_seconds_ago: float) -> MapItem:
    """The first item of a fresh map (max_attempts 1, timeout 5 s), put running on worker w-1."""
    each = node("each", "core.echo", map="input.items", timeout_seconds=5, retry={"max_attempts": 1})
    run, _ = runs.start_run(publish("lost-items", {"nodes": [each]}), {"items": [1, 2]})
    advance_runs([run.pk])  # the map waits with its items (their claim runs on commit: never here)
    item = MapItem.objects.get(run=run, index=0)
    started = timezone.now() - timedelta(seconds=started_seconds_ago)
    MapItem.objects.filter(pk=item.pk).update(
        status="running", attempt=1, tries=1, worker="w-1", started_at=started
    )
    return MapItem.objects.get(pk=item.pk)


def test_a_stopping_worker_hands_back_its_items_without_spending_their_retries() -> None:
    item = running_item(0)
    assert mapping.hand_back("w-1", "Worker w-1 was stopped.") == 1
    item.refresh_from_db()
    assert (item.status, item.tries, item.lost, item.error) == ("retrying", 0, 1, "Worker w-1 was stopped.")


def test_an_item_that_never_reported_past_its_timeout_under_a_live_worker_counts_like_a_failure() -> None:
    item = running_item(5 + mapping.OVERDUE_GRACE_SECONDS + 1)
    assert mapping.fail_lost(lambda names: set(), 100, 1) == 1
    item.refresh_from_db()
    assert (item.status, item.tries, item.lost) == ("dead", 1, 0)
    assert "never reported, 5 s timeout long past" in item.error


def test_an_item_within_its_timeout_under_a_live_worker_is_left_running() -> None:
    item = running_item(5)
    assert mapping.fail_lost(lambda names: set(), 100, 1) == 0
    item.refresh_from_db()
    assert item.status == "running"
