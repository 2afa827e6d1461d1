"""Child runs and call cycles through the API: refusals name the node's field; runs link both ways."""

from __future__ import annotations

import pytest

from tests.api.conftest import assert_problem
from tests.integration.conftest import publish
from workflows.runs import actions as runs
from workflows.store.models import ChildRun, NodeRun, WorkflowVersion

pytestmark = pytest.mark.django_db


def calling(slug: str) -> dict:
    return {"nodes": [{"id": "call", "handler": "workflow.run", "config": {"workflow": slug}}]}


def test_a_draft_that_closes_a_call_cycle_is_refused_naming_the_cycle(api, chain) -> None:
    publish("other", calling("chain"))
    body = assert_problem(
        api.post("workflows/chain/versions", {"definition": calling("other")}),
        422,
        "definition.nodes[0].config.workflow",
    )
    assert (
        "workflows would call each other in a cycle: chain -> other -> chain" in body["errors"][0]["message"]
    )
    assert WorkflowVersion.objects.filter(workflow=chain).count() == 1


def test_checking_a_definition_reports_the_cycle_and_an_unknown_child_as_structured_errors(
    api, chain
) -> None:
    publish("other", calling("chain"))
    definition = {
        "nodes": [
            {"id": "call", "handler": "workflow.run", "config": {"workflow": "other"}},
            {"id": "lost", "handler": "workflow.run", "config": {"workflow": "nobody"}},
        ]
    }
    errors = api.post("workflows/chain/validate", {"definition": definition}).json()["errors"]
    by_code = {e["code"]: e for e in errors}
    assert by_code["call_cycle"]["cycle"] == ["chain", "other", "chain"]
    assert (by_code["call_cycle"]["node"], by_code["call_cycle"]["field"]) == (
        "call",
        "nodes[0].config.workflow",
    )
    assert by_code["unknown_workflow"]["node"] == "lost"


def test_a_run_links_its_parent_and_its_children(api, chain) -> None:
    parent, _ = runs.start_run(publish("parent", calling("chain")), {})
    child, _ = runs.start_run(chain, {}, idempotency_key=f"parent:{parent.pk}:call:1")
    node = NodeRun.objects.get(run=parent, node_id="call")
    ChildRun.objects.create(parent_run=parent, node_run=node, node_id="call", attempt=1, child=child, depth=1)
    children = api.get(f"runs/{parent.pk}").json()["children"]
    assert children == [
        {
            "run": child.pk,
            "workflow": "chain",
            "status": "running",
            "node_id": "call",
            "attempt": 1,
            "url": f"/api/v1/runs/{child.pk}",
        }
    ]
    linked = api.get(f"runs/{child.pk}").json()
    assert linked["parent"]["run"] == parent.pk and linked["parent"]["workflow"] == "parent"
    assert linked["children"] == [] and api.get(f"runs/{parent.pk}").json()["parent"] is None
