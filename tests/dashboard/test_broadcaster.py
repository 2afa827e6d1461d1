"""The broadcaster: folds run events into windows and sends one message per topic and tick."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.utils import timezone

from monitoring.services import counters, sources
from monitoring.services.broadcaster import Broadcaster
from monitoring.services.stats import Windows, percentile
from tests.integration.conftest import node, publish
from workflows.runs import actions as runs
from workflows.runtime.logcontext import JsonFormatter, log_context
from workflows.store.models import NodeRun, RunEvent


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 50) is None
    assert percentile([5.0], 95) == 5.0
    assert percentile([float(n) for n in range(1, 101)], 95) == 95.0


def test_windows_count_recent_outcomes_and_forget_old_ones() -> None:
    windows = Windows()
    windows.add_attempt(1, "a", 1000.2, True, 10.0)
    windows.add_attempt(1, "a", 1000.7, False, 30.0)
    windows.add_attempt(1, "a", 400.0, True, 99.0)  # older than the node window at t=1001
    windows.add_run(1, 990.0, "succeeded")
    windows.prune(1001.0)
    assert windows.node_stats(1, 1001.0)["a"] == {"succeeded": 1, "failed": 1, "p50_ms": 10.0, "p95_ms": 30.0}
    assert windows.run_counts(1, 1001.0) == {
        "succeeded_1m": 1,
        "failed_1m": 0,
        "succeeded_1h": 1,
        "failed_1h": 0,
    }
    assert windows.rate_series(1001.0)[-1] == 2


def test_event_reader_remembers_ids_skipped_over_until_they_commit_or_expire() -> None:
    reader = sources.EventReader(start_after=4)
    reader.track_gaps([5, 8, 9], now=0.0)
    assert (reader.high, sorted(reader.gaps), reader.cursor) == (9, [6, 7], 5)
    reader.gaps.pop(6)
    assert reader.cursor == 6


def test_a_tick_sends_each_changed_topic_once_with_increasing_sequence_numbers(
    db: None, redis_clean: None
) -> None:
    workflow = publish("bcast", {"nodes": [node("a"), node("b")], "edges": [{"source": "a", "target": "b"}]})
    broadcaster = Broadcaster()
    broadcaster.start()
    broadcaster.tick()  # its first tick says that anything may have changed (tested below)
    run, _ = runs.start_run(workflow, {})
    now = timezone.now()
    a = NodeRun.objects.get(run=run, node_id="a")
    NodeRun.objects.filter(pk=a.pk).update(status="succeeded", attempt=1, started_at=now, finished_at=now)
    for n in range(3):  # many node events still make one message per topic
        RunEvent.objects.create(
            run=run, kind="node.attempt", node_id="a", attempt=1, at=now, started_at=now - timedelta(milliseconds=40),
            data={"status": "succeeded", "duration_ms": 40.0 + n},
        )  # fmt: skip
    messages, more = broadcaster.tick()
    topics = [m["topic"] for m in messages]
    assert len(topics) == len(set(topics))
    # workers: read at most once a second, so only if the first tick was that long ago
    assert set(topics) - {"workers"} == {"overview", f"workflow:{workflow.pk}", "runs"}
    overview = next(m for m in messages if m["topic"] == "overview")
    row = next(w for w in overview["data"]["workflows"] if w["slug"] == "bcast")
    assert row["running"] == 1 and overview["seq"] == 2
    assert 'data-workflow="bcast"' in overview["html"]["overview-workflows"]
    stats = next(m for m in messages if m["topic"] == f"workflow:{workflow.pk}")["data"]["nodes"]["a"]
    assert (stats["succeeded"], stats["p50_ms"]) == (3, 41.0)
    assert next(m for m in messages if m["topic"] == "runs")["data"]["runs"] == {str(run.pk): None}
    assert counters.latest("overview")["seq"] == 2, "the last snapshot is kept for page loads"
    assert counters.read_totals()[f"n|{workflow.pk}|succeeded|a"] == 3

    again, _ = broadcaster.tick()
    # Only the overview may move (its per-second chart slides); nothing else changed.
    assert {m["topic"] for m in again} <= {"overview"}, "unchanged topics wait for the keepalive"


def test_a_new_dead_letter_is_announced(db: None, redis_clean: None, dead_letter: Any) -> None:
    broadcaster = Broadcaster()
    broadcaster.start()
    broadcaster.tick()
    RunEvent.objects.create(
        run=dead_letter.run, kind="node.dead", node_id="boom", attempt=1, at=timezone.now()
    )
    messages, _ = broadcaster.tick()
    letters = next(m for m in messages if m["topic"] == "deadletters")
    assert letters["data"]["open"] == 1


def test_a_broadcaster_that_cannot_resume_tells_every_page_to_refetch_its_lists(
    db: None, redis_clean: None, dead_letter: Any
) -> None:
    """Events committed before it started (nothing saved to resume from: a first start, a
    flushed Redis, a long outage) are never read; pages must not keep lists from before."""
    RunEvent.objects.create(run=dead_letter.run, kind="approval.requested", node_id="boom", at=timezone.now())
    broadcaster = Broadcaster()
    broadcaster.start()
    first = {m["topic"]: m for m in broadcaster.tick()[0]}
    assert first["runs"]["data"]["overflow"] is True, "every run page re-reads its run"
    assert first["deadletters"]["data"]["open"] == 1
    assert "approvals" in first

    broadcaster.start()  # restarted in the same process: the cursor it saved lets it resume
    again = {m["topic"] for m in broadcaster.tick()[0]}
    assert not again & {"runs", "deadletters", "approvals"}


def test_json_logs_carry_run_and_node_ids() -> None:
    import logging

    record = logging.LogRecord("sy", logging.WARNING, __file__, 1, "node %s failed", ("a",), None)
    record.run_id = 7
    with log_context(node_id="a", attempt=2):
        line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "node a failed" and line["level"] == "WARNING"
    assert (line["run_id"], line["node_id"], line["attempt"]) == (7, "a", 2)


def test_the_broadcaster_waits_for_a_store_that_is_away_instead_of_exiting(
    transactional_db: None, settings: Any, caplog: Any
) -> None:
    """Publishing to a Redis that refuses connections (a port nothing listens on) fails a tick;
    the broadcaster says so and goes on ticking (the dashboard's own reads still work)."""
    import asyncio
    import socket

    from asgiref.sync import sync_to_async
    from channels.layers import channel_layers
    from django.db import connections

    from monitoring.services.broadcaster import run_forever

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # free once closed: nothing listens there
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [f"redis://127.0.0.1:{port}/0"]},
        }
    }
    settings.MONITOR = {**settings.MONITOR, "INTERVAL_SECONDS": 0.05}
    channel_layers.backends.clear()

    async def scenario() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(1.0, stop.set)
        await run_forever(Broadcaster(), stop)
        await sync_to_async(connections.close_all, thread_sensitive=True)()

    try:
        asyncio.run(scenario())
    finally:
        channel_layers.backends.clear()
    waits = [r.created for r in caplog.records if "broadcaster lost Redis" in r.getMessage()]
    assert waits, "the first tick's messages could not be published"
    assert counters.last_tick() > waits[0]  # a later tick ran to its end
