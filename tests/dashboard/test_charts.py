"""The charts' JSON: bucketed counts, durations, dead letters and backlog, and refusals."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from monitoring.services import charts
from tests.integration.conftest import node, publish
from workflows.runs import actions as runs
from workflows.store.models import DeadLetter, NodeRun, Run, Workflow


@pytest.fixture
def finished(db: None) -> Workflow:
    """Three runs of `shop` finished two minutes ago (2 succeeded in 1 s and 3 s, 1 failed), one dead letter."""
    workflow = publish("shop", {"nodes": [node("a", "core.echo")]})
    end = timezone.now() - timedelta(minutes=2)
    for status, seconds in (("succeeded", 1), ("succeeded", 3), ("failed", 2)):
        run, _ = runs.start_run(workflow, {})
        Run.objects.filter(pk=run.pk).update(
            status=status, created_at=end - timedelta(seconds=seconds), finished_at=end
        )
    a = NodeRun.objects.filter(run=run).first()
    DeadLetter.objects.create(run=run, node_run=a, node_id="a", attempt=1, error="x")
    return workflow


def bucket_of(data: dict[str, Any], label: str) -> list[Any]:
    return next(s["values"] for s in data["series"] if s["label"] == label)


@pytest.mark.parametrize("window", list(charts.WINDOWS))
def test_every_window_counts_the_runs_and_letters_once(finished: Workflow, window: str) -> None:
    data = charts.chart("runs", window)
    assert sum(bucket_of(data, "succeeded")) == 2 and sum(bucket_of(data, "failed")) == 1
    span = charts.WINDOWS[window].span.total_seconds()
    assert len(data["t"]) == pytest.approx(span / data["step"], abs=1.01)
    assert sum(bucket_of(charts.chart("deadletters", window), "opened")) == 1


def test_durations_give_p50_and_p95_per_workflow(finished: Workflow) -> None:
    data = charts.chart("durations", "15m")
    p50 = [v for v in bucket_of(data, "shop p50") if v is not None]
    p95 = [v for v in bucket_of(data, "shop p95") if v is not None]
    assert p50 == [pytest.approx(2000, abs=5)] and p95 == [pytest.approx(2900, abs=5)]


def test_a_workflow_chart_counts_only_its_runs(finished: Workflow) -> None:
    other = publish("other", {"nodes": [node("a", "core.echo")]})
    assert sum(bucket_of(charts.chart("runs", "1h", other.pk), "succeeded")) == 0
    assert sum(bucket_of(charts.chart("runs", "1h", finished.pk), "succeeded")) == 2
    assert sum(bucket_of(charts.chart("deadletters", "1h", other.pk), "opened")) == 0


def test_backlog_is_the_highest_sample_per_bucket(finished: Workflow) -> None:
    now = timezone.now()
    charts.sample_backlog({"default": 4}, {finished.pk: 2}, now - timedelta(seconds=5))
    charts.sample_backlog({"default": 9}, {finished.pk: 1}, now - timedelta(seconds=4))
    assert max(v or 0 for v in bucket_of(charts.chart("backlog", "15m"), "default")) == 9
    assert max(v or 0 for v in bucket_of(charts.chart("backlog", "15m", finished.pk), "queued nodes")) == 2


def test_the_endpoint_refuses_an_unknown_window_naming_it(finished: Workflow, client_as: Any) -> None:
    client = client_as("viewer")
    assert client.get("/charts/runs.json?window=2y").json()["detail"].startswith("window: choose one of")
    assert client.get("/charts/pies.json").status_code == 400
    assert client.get("/charts/runs.json?window=1h&workflow=nope").status_code == 404
    assert client.get("/charts/runs.json?window=6h&workflow=shop").json()["window"] == "6h"
    assert client_as(None).get("/charts/runs.json").status_code == 403
