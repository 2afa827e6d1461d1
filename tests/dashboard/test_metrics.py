"""/metrics: who may read it, and what it says."""

from __future__ import annotations

from typing import Any

from django.test import Client

from monitoring.services import counters
from workflows.runtime import bus
from workflows.store.models import DeadLetter


def test_metrics_refuse_anonymous_and_non_admin_users(dead_letter: DeadLetter, client_as: Any) -> None:
    assert Client().get("/metrics").status_code == 401
    assert client_as("operator").get("/metrics").status_code == 401
    assert Client().get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401


def test_metrics_answer_a_token_and_an_admin(dead_letter: DeadLetter, client_as: Any, settings: Any) -> None:
    settings.MONITOR = {**settings.MONITOR, "METRICS_TOKEN": "s3cret"}
    by_token = Client().get("/metrics", headers={"Authorization": "Bearer s3cret"})
    assert by_token.status_code == 200 and by_token["Content-Type"].startswith("text/plain")
    assert client_as("admin").get("/metrics").status_code == 200
    text = by_token.content.decode()
    assert 'switchyard_dead_letters_open{workflow="drill"} 1.0' in text
    assert 'switchyard_queue_depth{queue="default"}' in text
    assert "switchyard_workers_alive 0.0" in text


def test_metrics_expose_the_broadcasters_totals_as_counters_and_a_histogram(
    dead_letter: DeadLetter, client_as: Any
) -> None:
    totals = counters.Totals()
    workflow_id = dead_letter.run.workflow_id
    totals.node_attempt(workflow_id, "boom", "failed", 3.0)
    totals.node_attempt(workflow_id, "boom", "failed", 700.0)
    totals.run_finished(workflow_id, "failed")
    pipe = bus.client().pipeline()
    totals.write(pipe)
    pipe.execute()
    text = client_as("admin").get("/metrics").content.decode()
    assert 'switchyard_node_executions_total{node="boom",status="failed",workflow="drill"} 2.0' in text
    assert 'switchyard_runs_finished_total{status="failed",workflow="drill"} 1.0' in text
    assert 'switchyard_node_duration_seconds_bucket{le="0.005",node="boom",workflow="drill"} 1.0' in text
    assert 'switchyard_node_duration_seconds_bucket{le="1.0",node="boom",workflow="drill"} 2.0' in text
    assert 'switchyard_node_duration_seconds_count{node="boom",workflow="drill"} 2.0' in text
