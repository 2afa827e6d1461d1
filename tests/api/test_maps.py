"""A map node's items over the API: progress, pages in order, a filter, precise refusals."""

from __future__ import annotations

from typing import Any

from tests.api.conftest import assert_problem
from tests.integration.conftest import node, publish, wait_finished
from tests.integration.runtime import Runtime
from workflows.runs import actions as runs


def test_a_map_nodes_items_are_listed_in_order_page_by_page_with_its_progress(
    runtime: Runtime, api_as: Any
) -> None:
    definition = {
        "nodes": [node("each", "demo.summarise_document", map="input.docs", on_item_failure="continue")]
    }
    docs: list[Any] = [f"doc {i}" for i in range(75)]
    docs[3] = {"text": "bad", "broken": True}
    run, _ = runs.start_run(publish("api-map", definition), {"docs": docs})
    assert wait_finished(run, 120).status == "succeeded"
    api = api_as("viewer", "read")

    whole = api.get(f"runs/{run.pk}").json()
    assert whole["nodes"][0]["items"] == {"total": 75, "done": 74, "failed": 1, "running": 0, "pending": 0}
    first = api.get(f"runs/{run.pk}/nodes/each/items", limit=50).json()
    assert first["progress"]["total"] == 75 and first["status"] == "succeeded"
    assert [i["index"] for i in first["items"]] == list(range(50))
    second = api.get(f"runs/{run.pk}/nodes/each/items", limit=50, cursor=first["next_cursor"]).json()
    assert [i["index"] for i in second["items"]] == list(range(50, 75)) and second["next_cursor"] is None
    failed = api.get(f"runs/{run.pk}/nodes/each/items", status="failed").json()["items"]
    assert [(i["index"], i["status"], i["item"]) for i in failed] == [
        (3, "dead", {"text": "bad", "broken": True})
    ]
    assert "document 3 is unreadable" in failed[0]["error"]

    assert_problem(api.get(f"runs/{run.pk}/nodes/nope/items"), 404)
    assert_problem(api.get(f"runs/{run.pk}/nodes/each/items", status="lost"), 400, "status")
