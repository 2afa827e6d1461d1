"""An attempt lost with its worker is retried without counting against the retry policy,
up to FREE_LOST_ATTEMPTS times per node; a hang past the timeout counts like a failure.

The process-level check (a worker killed with SIGKILL mid-node, max_attempts 1, the run
succeeds) is in test_runtime.py; these drive the reconciler's statement and the engine's
decision on one node, so each bound is exact.
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from tests.integration.conftest import node, publish
from workflows.runs import actions as runs
from workflows.runtime.advancing import advance_runs
from workflows.runtime.reconciler import Reconciler
from workflows.runtime.transitions import Lost
from workflows.store.models import NodeRun, RunEvent

pytestmark = pytest.mark.django_db


def running_node(**fields: int) -> NodeRun:
    """The only node of a fresh run (max_attempts 1), put running on worker w-1."""
    run, _ = runs.start_run(publish("lost", {"nodes": [node("a", "core.echo")]}), {})
    noderun = NodeRun.objects.get(run=run, node_id="a")
    values = {"attempt": 1, "tries": 1, **fields}
    NodeRun.objects.filter(pk=noderun.pk).update(
        status="running", worker="w-1", started_at=timezone.now(), **values
    )
    return NodeRun.objects.get(pk=noderun.pk)


def lose(noderun: NodeRun, free: bool = True) -> NodeRun:
    lost = Lost(noderun.pk, noderun.attempt, "Worker w-1 stopped heart-beating during attempt 1.", free)
    assert Reconciler().fail_attempts([lost]) == 1
    advance_runs([noderun.run_id])
    return NodeRun.objects.get(pk=noderun.pk)


def test_an_attempt_lost_with_its_worker_is_retried_though_the_policy_allows_one_attempt() -> None:
    after = lose(running_node())
    assert (after.status, after.tries, after.lost) == ("retrying", 0, 1)
    assert RunEvent.objects.filter(run_id=after.run_id, kind="node.lost", node_id="a").count() == 1


@override_settings(SWITCHYARD={**settings.SWITCHYARD, "FREE_LOST_ATTEMPTS": 3})
def test_past_the_free_lost_attempts_a_lost_attempt_counts_and_the_node_dies() -> None:
    after = lose(running_node(attempt=4, tries=1, lost=3))
    assert (after.status, after.tries, after.lost) == ("dead", 1, 3)


def test_an_attempt_that_never_reported_past_its_timeout_counts_like_a_failure() -> None:
    after = lose(running_node(), free=False)
    assert (after.status, after.tries, after.lost) == ("dead", 1, 0)
