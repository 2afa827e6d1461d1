"""Retention: what is pruned and what is kept, in batches; the admins' page; a real scheduler pruning."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane import access
from tests.api.conftest import dead_letter as kill_a_node
from tests.integration.conftest import node, publish
from tests.integration.runtime import Runtime, wait_for
from workflows.operations import retention
from workflows.runs import actions as runs
from workflows.store.models import AuditEntry, DeadLetter, NodeRun, Run, RunEvent

CHAIN = {"nodes": [node("first"), node("second")], "edges": [{"source": "first", "target": "second"}]}


def finished(workflow: Any, days_ago: float, status: str = "succeeded") -> Run:
    run, _ = runs.start_run(workflow, {"n": 1})
    Run.objects.filter(pk=run.pk).update(status=status, finished_at=timezone.now() - timedelta(days=days_ago))
    RunEvent.objects.create(run=run, kind="node.attempt", node_id="first", attempt=1, at=timezone.now())
    return run


@pytest.fixture
def chain(db: None) -> Any:
    return publish("chain", CHAIN)


def test_runs_past_the_age_go_whole_and_the_rest_stay(chain, settings) -> None:
    settings.SWITCHYARD = {**settings.SWITCHYARD, "RETENTION_DAYS": 30}
    old = finished(chain, 31)
    young = finished(chain, 29)
    running, _ = runs.start_run(chain, {})
    Run.objects.filter(pk=running.pk).update(created_at=timezone.now() - timedelta(days=90))
    held = kill_a_node(chain)  # its dead letter is open: kept until handled
    Run.objects.filter(pk=held.pk).update(finished_at=timezone.now() - timedelta(days=90))
    handled = kill_a_node(chain)
    Run.objects.filter(pk=handled.pk).update(finished_at=timezone.now() - timedelta(days=90))
    DeadLetter.objects.filter(run=handled).update(status=DeadLetter.DISCARDED)

    assert retention.prune() == 2

    assert set(Run.objects.values_list("pk", flat=True)) == {young.pk, running.pk, held.pk}
    assert not NodeRun.objects.filter(run_id__in=[old.pk, handled.pk]).exists()
    assert not RunEvent.objects.filter(run_id__in=[old.pk, handled.pk]).exists()
    assert not DeadLetter.objects.filter(run_id=handled.pk).exists()
    assert DeadLetter.objects.filter(run_id=held.pk, status=DeadLetter.OPEN).exists()


def test_a_workflow_override_and_zero_keep_for_ever(chain, settings) -> None:
    settings.SWITCHYARD = {**settings.SWITCHYARD, "RETENTION_DAYS": 30}
    other = publish("other", CHAIN)
    kept = finished(chain, 100)
    short = finished(other, 3)
    retention.set_workflow_days(chain, 0)
    retention.set_workflow_days(other, 2)

    assert retention.prune() == 1
    assert list(Run.objects.values_list("pk", flat=True)) == [kept.pk]
    assert not Run.objects.filter(pk=short.pk).exists()

    settings.SWITCHYARD = {**settings.SWITCHYARD, "RETENTION_DAYS": 0}
    retention.set_workflow_days(chain, None)
    assert retention.prune() == 0  # the default 0 keeps everything too


def test_pruning_goes_in_batches_of_a_bounded_size(chain, settings) -> None:
    settings.SWITCHYARD = {**settings.SWITCHYARD, "RETENTION_DAYS": 1}
    for _ in range(5):
        finished(chain, 2)
    original = retention.BATCH
    retention.BATCH = 2
    try:
        assert retention.prune(batches=2) == 4  # two batches of two: one run left for the next call
        assert Run.objects.count() == 1
        assert retention.prune() == 1
    finally:
        retention.BATCH = original


def test_an_out_of_range_override_is_refused_naming_the_field(chain) -> None:
    with pytest.raises(retention.Invalid, match="retention_days: -1 is out of range"):
        retention.set_workflow_days(chain, -1)


def test_admins_see_the_settings_sizes_and_change_a_workflows_age(chain, client_as) -> None:
    admin = client_as(access.ADMIN)
    page = admin.get("/retention/").content.decode()
    assert "workflows_run" in page and "workflows_runevent" in page and "30 days" in page

    answer = admin.post("/retention/workflows/chain/", {"retention_days": "7"})
    assert answer.status_code == 302
    chain.refresh_from_db()
    assert chain.retention_days == 7
    assert AuditEntry.objects.filter(action="workflow.retention", target_id=str(chain.pk)).exists()
    assert "7 days" in admin.get("/retention/").content.decode()

    refused = admin.post("/retention/workflows/chain/", {"retention_days": "seven"}, follow=True)
    assert "retention_days: &#x27;seven&#x27; is not a whole number of days." in refused.content.decode()


@pytest.mark.parametrize("role", [access.VIEWER, access.OPERATOR, access.EDITOR])
def test_only_admins_reach_the_retention_page(chain, client_as, role) -> None:
    client = client_as(role)
    assert client.get("/retention/").status_code == 403
    assert client.post("/retention/workflows/chain/", {"retention_days": "1"}).status_code == 403
    chain.refresh_from_db()
    assert chain.retention_days is None


def test_a_real_scheduler_prunes_expired_runs(transactional_db, redis_clean) -> None:
    workflow = publish("chain", CHAIN)
    old = finished(workflow, 45)
    young = finished(workflow, 1)
    rt = Runtime()
    rt.scheduler("pruner")
    try:
        wait_for(
            lambda: not Run.objects.filter(pk=old.pk).exists(), timeout=60, what="the scheduler to prune"
        )
    finally:
        rt.stop()
    assert Run.objects.filter(pk=young.pk).exists()
