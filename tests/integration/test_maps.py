"""Map nodes end to end: real Postgres, real Redis, real RQ workers and schedulers."""

from __future__ import annotations

import signal
from datetime import datetime

import pytest

from tests.integration.conftest import node, publish, wait_finished
from tests.integration.runtime import Runtime, wait_for
from workflows.runs import actions as runs
from workflows.runtime import bus
from workflows.store.models import DeadLetter, MapItem, NodeRun, Run, RunEvent

SUMMARISE = "demo.summarise_document"


def most_in_flight(spans: list[tuple[datetime, datetime]]) -> int:
    """The largest number of [start, finish] intervals open at one instant."""
    edges = sorted([(s, 1) for s, _ in spans] + [(f, -1) for _, f in spans], key=lambda e: (e[0], e[1]))
    most = current = 0
    for _, step in edges:
        current += step
        most = max(most, current)
    return most


def map_node(run: Run, node_id: str = "each") -> NodeRun:
    return NodeRun.objects.get(run=run, node_id=node_id)


def test_a_map_of_1000_items_never_runs_more_than_max_parallel_and_keeps_their_order(
    runtime: Runtime,
) -> None:
    runtime.worker("worker-3")
    runtime.wait_ready()
    definition = {
        "nodes": [
            node("each", SUMMARISE, config={"seconds": 0.002}, map="input.documents", max_parallel=10),
            node("after", "core.echo"),
        ],
        "edges": [{"source": "each", "target": "after"}],
    }
    documents = [f"document number {i} " + "word " * (i % 7) for i in range(1000)]
    run, _ = runs.start_run(publish("map-1000", definition), {"documents": documents})
    assert wait_finished(run, 240).status == "succeeded"

    each = map_node(run)
    assert each.output == [
        {"index": i, "words": len(d.split()), "title": d[:40]} for i, d in enumerate(documents)
    ]
    assert map_node(run, "after").output["upstream"]["each"] == each.output
    spans = list(MapItem.objects.filter(node_run=each).values_list("started_at", "finished_at"))
    assert len(spans) == 1000 and all(s <= f for s, f in spans)
    assert MapItem.objects.filter(node_run=each).exclude(attempt=1).count() == 0
    assert 1 < most_in_flight(spans) <= 10


def broken_map(policy: str) -> dict:
    return {
        "nodes": [
            node(
                "each",
                SUMMARISE,
                map="input.documents",
                max_parallel=3,
                on_item_failure=policy,
                retry={"max_attempts": 2, "backoff_seconds": 0.1},
            ),
            node("after", "core.echo"),
        ],
        "edges": [{"source": "each", "target": "after"}],
    }


DOCUMENTS = ["alpha beta", "gamma", {"text": "torn page", "broken": True}, "delta epsilon zeta", "eta"]


def test_a_dead_item_fails_the_map_and_its_replay_finishes_the_node(runtime: Runtime) -> None:
    run, _ = runs.start_run(publish("map-dead-item", broken_map("fail")), {"documents": DOCUMENTS})
    assert wait_finished(run).status == "failed"
    each = map_node(run)
    assert each.status == "dead"
    assert "1 of 5 items failed (items 2)" in each.error
    assert map_node(run, "after").status == "upstream_failed"
    letter = DeadLetter.objects.get(run=run)
    assert letter.map_item is not None and letter.map_item.index == 2
    assert letter.map_item.attempt == 2, "the item had its own retries"
    assert "document 2 is unreadable" in letter.error
    assert letter.input_snapshot["item"] == {"text": "torn page", "broken": True}

    runs.replay_dead_letter(letter.pk, edited_input={"text": "mended page"})
    assert wait_finished(run).status == "succeeded"
    each = map_node(run)
    assert [o["title"] for o in each.output] == [
        "alpha beta",
        "gamma",
        "mended page",
        "delta epsilon zeta",
        "eta",
    ]
    assert map_node(run, "after").status == "succeeded"
    ran = MapItem.objects.filter(node_run=each).values_list("index", "attempt")
    assert dict(ran) == {0: 1, 1: 1, 2: 3, 3: 1, 4: 1}, "only the replayed item ran again"


def test_a_map_that_continues_marks_its_failed_items_in_its_output(runtime: Runtime) -> None:
    run, _ = runs.start_run(publish("map-continue", broken_map("continue")), {"documents": DOCUMENTS})
    assert wait_finished(run).status == "succeeded"
    output = map_node(run).output
    assert output[2] == {"failed": True, "index": 2, "error": "document 2 is unreadable: 'torn page'"}
    assert [o.get("title") for o in output] == ["alpha beta", "gamma", None, "delta epsilon zeta", "eta"]
    assert DeadLetter.objects.filter(run=run, map_item__index=2).count() == 1


@pytest.mark.parametrize(
    ("run_input", "message"),
    [
        ({"documents": "not a list"}, "map 'input.documents' gave a string, not a list"),
        ({"documents": {"a": 1}}, "map 'input.documents' gave a object, not a list"),
        ({}, "map 'input.documents' gave null (or nothing), not a list"),
        (
            {"documents": list(range(10_001))},
            "map 'input.documents' gave 10,001 items; a map runs at most 10,000",
        ),
    ],
)
def test_a_map_over_what_is_not_a_list_of_at_most_10000_fails_naming_it(
    runtime: Runtime, run_input: dict, message: str
) -> None:
    definition = {"nodes": [node("each", SUMMARISE, map="input.documents")]}
    run, _ = runs.start_run(publish("map-bad", definition), run_input)
    assert wait_finished(run).status == "failed"
    each = map_node(run)
    assert each.status == "dead"
    assert message in each.error
    assert message in DeadLetter.objects.get(run=run).error
    assert not MapItem.objects.filter(node_run=each).exists()


def test_an_empty_list_gives_an_empty_output(runtime: Runtime) -> None:
    definition = {"nodes": [node("each", SUMMARISE, map="input.documents")]}
    run, _ = runs.start_run(publish("map-empty", definition), {"documents": []})
    assert wait_finished(run).status == "succeeded"
    assert map_node(run).output == []


def test_kill_9_of_workers_and_the_scheduler_mid_map_finishes_every_item_once(runtime: Runtime) -> None:
    definition = {
        "nodes": [
            node(
                "each",
                SUMMARISE,
                config={"seconds": 0.05},
                map="input.documents",
                max_parallel=6,
                retry={"max_attempts": 3, "backoff_seconds": 0.1},
            )
        ]
    }
    documents = [f"doc {i}" for i in range(200)]
    run, _ = runs.start_run(publish("map-kill", definition), {"documents": documents})
    each = wait_for(
        lambda: NodeRun.objects.filter(run=run, node_id="each", status="waiting").first(), 60, "map"
    )
    wait_for(lambda: MapItem.objects.filter(node_run=each, status="succeeded").count() >= 20, 60, "items")
    runtime.kill("worker-1", signal.SIGKILL)
    runtime.kill("scheduler-1", signal.SIGKILL)
    wait_for(
        lambda: MapItem.objects.filter(node_run=each, status="succeeded").count() >= 60, 60, "more items"
    )
    runtime.kill("worker-2", signal.SIGKILL)
    runtime.worker("worker-3")
    runtime.scheduler("scheduler-2")
    assert wait_finished(run, 180).status == "succeeded"

    each.refresh_from_db()
    assert [o["title"] for o in each.output] == documents
    items = MapItem.objects.filter(node_run=each)
    assert items.count() == 200 and set(items.values_list("status", flat=True)) == {"succeeded"}
    finished = RunEvent.objects.filter(run=run, node_id="each", kind="node.attempt")
    assert finished.count() == 1, "the map node finished exactly once"


def test_cancel_of_the_run_cancels_its_open_items(runtime: Runtime) -> None:
    definition = {
        "nodes": [node("each", SUMMARISE, config={"seconds": 0.2}, map="input.documents", max_parallel=2)]
    }
    run, _ = runs.start_run(publish("map-cancel", definition), {"documents": [f"d{i}" for i in range(50)]})
    each = wait_for(
        lambda: NodeRun.objects.filter(run=run, node_id="each", status="waiting").first(), 60, "map"
    )
    wait_for(lambda: MapItem.objects.filter(node_run=each, status="succeeded").exists(), 60, "an item")
    runs.cancel_run(run.pk)
    items = MapItem.objects.filter(node_run=each)
    assert items.filter(status__in=["pending", "queued"]).count() == 0
    assert items.filter(status="cancelled").count() >= 40
    wait_for(lambda: not items.filter(status="running").exists(), 10, "running items to end")
    each.refresh_from_db()
    assert each.status == "cancelled"


def test_redis_flushed_mid_map_loses_no_item(runtime: Runtime) -> None:
    definition = {
        "nodes": [node("each", SUMMARISE, config={"seconds": 0.1}, map="input.documents", max_parallel=5)]
    }
    documents = [f"doc {i}" for i in range(40)]
    run, _ = runs.start_run(publish("map-flush", definition), {"documents": documents})
    each = wait_for(
        lambda: NodeRun.objects.filter(run=run, node_id="each", status="waiting").first(), 60, "map"
    )
    wait_for(lambda: MapItem.objects.filter(node_run=each, status="succeeded").count() >= 5, 60, "items")
    bus.client().flushdb()  # its own database: under xdist another worker uses the next one
    assert wait_finished(run, 120).status == "succeeded"
    each.refresh_from_db()
    assert [o["title"] for o in each.output] == documents
