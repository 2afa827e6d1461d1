"""The operations the editor added to the API, called with keys as any integration would."""

from __future__ import annotations

import pytest

from tests.api.conftest import assert_problem
from workflows.store.models import Run

pytestmark = pytest.mark.django_db

CYCLIC = {
    "nodes": [{"id": "a", "handler": "core.noop"}, {"id": "b", "handler": "core.noop"}],
    "edges": [{"source": "a", "target": "b"}, {"source": "b", "target": "a"}],
}


def test_a_read_key_checks_a_definition_and_gets_structured_errors(api_as, chain) -> None:
    reader = api_as("viewer", "read")
    body = reader.post("workflows/chain/validate", {"definition": CYCLIC}).json()
    assert body["valid"] is False
    assert body["errors"] == [
        {
            "in": "body",
            "path": "definition.edges",
            "code": "cycle",
            "message": "cycle: a -> b -> a",
            "node": None,
            "field": "edges",
            "cycle": ["a", "b", "a"],
        }
    ]


def test_a_refused_save_carries_the_same_structured_errors(api, chain) -> None:
    body = assert_problem(
        api.post("workflows/chain/versions", {"definition": CYCLIC}), 422, "definition.edges"
    )
    assert body["errors"][0]["cycle"] == ["a", "b", "a"]


def test_a_run_key_test_runs_a_published_version_but_not_a_draft(api, api_as, chain) -> None:
    assert api.post("workflows/chain/versions", {"definition": {"nodes": CYCLIC["nodes"]}}).status_code == 201
    runner = api_as("operator", "run")
    response = runner.post("workflows/chain/versions/1/test-runs", {"input": {"x": 1}})
    assert response.status_code == 201 and response.json()["version"] == 1
    body = assert_problem(runner.post("workflows/chain/versions/2/test-runs"), 403)
    assert "'edit' scope" in body["detail"]
    assert Run.objects.count() == 1
    editor = api_as("editor", "run", "edit")
    snapshot = editor.post("workflows/chain/versions/2/test-runs")
    assert snapshot.status_code == 201 and snapshot.json()["version"] == 3
