"""Map items on a worker's slots (runtime/items.py), real processes: I/O-bound items at once.

`http.request` items against a local server that holds each request (tests/fakes/http_server.py):
gated, so "N items in flight on one worker" is a fact the test waits for, not a timing; the
server counts requests per Idempotency-Key (`run:node[index]:attempt`), so an item attempt
sent twice shows. The overlap is read from the server and sampled from PostgreSQL.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.http_server import HeldHTTPServer
from tests.integration.conftest import node, publish, wait_finished
from tests.integration.runtime import Runtime, wait_for
from tests.integration.test_slots import assert_slots_shown
from workflows.runs import actions as runs
from workflows.runtime import bus
from workflows.store.models import MapItem, NodeRun, Run, RunEvent

SLOTS = 100


@pytest.fixture
def server() -> Iterator[HeldHTTPServer]:
    with HeldHTTPServer(gated=True) as held:
        yield held


@pytest.fixture
def rt(transactional_db: Any, redis_clean: None, server: HeldHTTPServer) -> Iterator[Runtime]:
    runtime = Runtime(SWITCHYARD_WORKER_SLOTS=str(SLOTS))
    yield runtime
    server.go.set()
    runtime.stop()


def fetch_each(slug: str, server: HeldHTTPServer, max_parallel: int, max_attempts: int = 1) -> Any:
    config = {"url": server.url + "/doc", "timeout_seconds": 120}
    retry = {"max_attempts": max_attempts, "backoff_seconds": 0.1}
    each = node(
        "each",
        "http.request",
        config=config,
        map="input.documents",
        max_parallel=max_parallel,
        retry=retry,
        timeout_seconds=180,
    )
    return publish(slug, {"nodes": [each], "edges": []})


def start(rt: Runtime, *workers: str) -> None:
    for name in workers:
        rt.worker(name)
    rt.scheduler("s1")
    rt.wait_ready()


def start_map(workflow: Any, count: int) -> Run:
    return runs.start_run(workflow, {"documents": [f"doc {i}" for i in range(count)]})[0]


def running(run: Run) -> int:
    return MapItem.objects.filter(run=run, status="running").count()


def finished_sampling(run: Run, timeout: float = 180) -> tuple[Run, int]:
    """Wait for the run to finish; return it and the most items seen running at once."""
    most = [0]

    def done() -> bool:
        most[0] = max(most[0], running(run))
        run.refresh_from_db()
        return run.status in {"succeeded", "failed", "cancelled"}

    wait_for(done, timeout, f"run {run.pk} to finish")
    return run, most[0]


def heartbeat(worker: str) -> dict[str, Any]:
    raw = bus.client().get(bus.worker_key(worker))
    return json.loads(raw) if raw else {}


def key(run: Run, index: int, attempt: int) -> str:
    return f"{run.pk}:each[{index}]:{attempt}"


def assert_each_item_once(run: Run, count: int, attempt: int) -> None:
    """The map succeeded once, every item at `attempt` with its own answer, in order, and no
    item attempt was sent twice."""
    assert run.status == "succeeded", list(
        MapItem.objects.filter(run=run).exclude(error="").values("error")[:3]
    )
    each = NodeRun.objects.get(run=run, node_id="each")
    assert [o["json"]["key"] for o in each.output] == [key(run, i, attempt) for i in range(count)]
    items = MapItem.objects.filter(node_run=each)
    assert set(items.values_list("status", "attempt")) == {("succeeded", attempt)}
    assert RunEvent.objects.filter(run=run, node_id="each", kind="node.attempt").count() == 1


def assert_sent_once_each(server: HeldHTTPServer) -> None:
    assert server.keys and set(server.keys.values()) == {1}, server.keys.most_common(3)


def test_one_worker_runs_a_maps_io_items_on_its_slots_at_once(
    rt: Runtime, server: HeldHTTPServer, settings: Any
) -> None:
    start(rt, "w1")
    run = start_map(fetch_each("fetch-200", server, max_parallel=200), 200)

    wait_for(lambda: server.open == SLOTS, 120, f"{SLOTS} items held at the server at once")
    assert MapItem.objects.filter(run=run, status="running", worker="w1").count() == SLOTS  # claimed in PG
    wait_for(lambda: heartbeat("w1").get("slots_used") == SLOTS, 10, "the heartbeat to show the slots used")
    assert heartbeat("w1")["slots_free"] == 0
    assert_slots_shown(settings, used=SLOTS, total=SLOTS)  # the workers page and /metrics
    server.go.set()

    run, _ = finished_sampling(run)
    assert_each_item_once(run, 200, attempt=1)
    assert_sent_once_each(server)
    assert server.most_open == SLOTS  # the slots, never more: the worker pops no job without one
    wait_for(lambda: heartbeat("w1").get("slots_used") == 0, 10, "the slots to be free again")


def test_items_on_slots_never_exceed_max_parallel(rt: Runtime, server: HeldHTTPServer) -> None:
    server.gated, server.delay = False, 0.2
    start(rt, "w1")
    run = start_map(fetch_each("fetch-capped", server, max_parallel=7), 60)

    run, sampled = finished_sampling(run)
    assert_each_item_once(run, 60, attempt=1)
    assert 1 < sampled <= 7
    assert 1 < server.most_open <= 7


def test_kill_9_of_a_worker_with_items_on_its_slots_loses_and_doubles_none(
    rt: Runtime, server: HeldHTTPServer
) -> None:
    start(rt, "w1")
    run = start_map(fetch_each("fetch-killed", server, max_parallel=60, max_attempts=1), 60)
    wait_for(lambda: server.open == 60, 120, "60 items held at the server")

    rt.kill("w1")
    server.go.set()
    rt.worker("w2")

    run, _ = finished_sampling(run)
    assert_each_item_once(run, 60, attempt=2)  # max_attempts 1: the lost attempt cost no retry
    assert set(MapItem.objects.filter(run=run).values_list("worker", "lost")) == {("w2", 1)}
    assert_sent_once_each(server)
    assert set(server.keys) == {key(run, i, a) for i in range(60) for a in (1, 2)}


def test_a_stopped_worker_drains_its_items_and_takes_no_new_job(rt: Runtime, server: HeldHTTPServer) -> None:
    rt.env["SWITCHYARD_WORKER_DRAIN_SECONDS"] = "60"
    start(rt, "w1")
    workflow = fetch_each("fetch-drained", server, max_parallel=20)
    run = start_map(workflow, 20)
    wait_for(lambda: server.open == 20, 120, "20 items held at the server")

    rt.procs["w1"].send_signal(signal.SIGTERM)
    later = start_map(workflow, 3)  # its items are queued while w1 drains: it must not take them
    wait_for(
        lambda: MapItem.objects.filter(run=later, status="queued").count() == 3, 30, "later items queued"
    )
    wait_for(lambda: heartbeat("w1").get("slots_used") == 20, 10, "w1 to beat on while draining")
    server.go.set()

    assert rt.procs["w1"].wait(60) == 0
    run, _ = finished_sampling(run, 60)
    assert_each_item_once(run, 20, attempt=1)
    assert set(MapItem.objects.filter(run=run).values_list("worker", flat=True)) == {"w1"}
    assert set(MapItem.objects.filter(run=later).values_list("status", "worker")) == {("queued", "")}


def test_a_stopped_worker_hands_back_its_items_at_the_drain_deadline(
    rt: Runtime, server: HeldHTTPServer
) -> None:
    rt.env["SWITCHYARD_WORKER_DRAIN_SECONDS"] = "2"
    start(rt, "w1")
    run = start_map(fetch_each("fetch-handed-back", server, max_parallel=10), 10)
    wait_for(lambda: server.open == 10, 120, "10 items held at the server")

    rt.procs["w1"].send_signal(signal.SIGTERM)

    assert rt.procs["w1"].wait(20) == 0
    errors = set(MapItem.objects.filter(run=run).values_list("error", flat=True))
    assert len(errors) == 1 and "was stopped; not done within the 2 s drain" in errors.pop()
    server.go.set()
    rt.worker("w2")
    run, _ = finished_sampling(run)
    assert_each_item_once(run, 10, attempt=2)
    assert set(MapItem.objects.filter(run=run).values_list("worker", "lost")) == {("w2", 1)}


def test_a_cpu_bound_item_beside_busy_slots_keeps_its_time_limit(rt: Runtime, server: HeldHTTPServer) -> None:
    start(rt, "w1")
    run = start_map(fetch_each("fetch-busy", server, max_parallel=20), 20)
    wait_for(lambda: server.open == 20, 120, "20 items held at the server")
    slow = node(
        "spin",
        "core.delay",
        config={"seconds": 60},
        map="input.documents",
        timeout_seconds=1,
        retry={"max_attempts": 1},
    )
    spin = runs.start_run(publish("spin-map", {"nodes": [slow], "edges": []}), {"documents": ["x"]})[0]

    assert wait_finished(spin, 30).status == "failed"
    item = MapItem.objects.get(run=spin)
    assert (item.status, item.worker, item.error) == (
        "dead",
        "w1",
        "Item 0 of node 'spin' timed out after 1 s.",
    )
    assert server.open == 20  # the slots held on meanwhile
    server.go.set()
    run, _ = finished_sampling(run)
    assert_each_item_once(run, 20, attempt=1)


def test_each_item_reaches_the_server_at_its_own_url_from_item_placeholders(
    rt: Runtime, server: HeldHTTPServer
) -> None:
    server.gated = False
    config = {"url": server.url + "/doc/{item.id}?at={index}&tag={item.tags.0}", "timeout_seconds": 60}
    each = node("each", "http.request", config=config, map="input.documents", max_parallel=5)
    workflow = publish("fetch-by-item", {"nodes": [each], "edges": []})
    documents = [{"id": f"d{i}" if i != 3 else "a b/c", "tags": [f"t{i}"]} for i in range(12)]
    start(rt, "w1")
    run = runs.start_run(workflow, {"documents": documents})[0]

    run, _ = finished_sampling(run, timeout=120)
    assert_each_item_once(run, 12, attempt=1)
    paths = [o["json"]["path"] for o in NodeRun.objects.get(run=run, node_id="each").output]
    assert paths[3] == "/doc/a%20b%2Fc?at=3&tag=t3"  # percent-encoded: an item cannot pick the path
    assert paths == [f"/doc/{'d' + str(i) if i != 3 else 'a%20b%2Fc'}?at={i}&tag=t{i}" for i in range(12)]
