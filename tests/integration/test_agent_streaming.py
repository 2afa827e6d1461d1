"""An agent node's turns stream: real worker, scheduler and Daphne against the fake provider.

The attempt's text stream carries each model turn between `turn` markers; the SSE endpoint
replays then follows it with turn events; a worker killed mid-turn leaves a stream that
stops there, and the next attempt streams the re-asked turn into a stream of its own; a
malformed streamed tool call fails the turn (recorded failed, marked failed) and is retried.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.llm_server import FakeLLMServer
from tests.integration.conftest import publish, wait_finished, worker_scheduler_and_daphne
from tests.integration.runtime import Runtime, wait_for
from tests.integration.test_agent import MODULES, agent_flow, bodies, completion, scripted, steps, tool_log
from tests.integration.test_llm_streaming import api_key, sse_events
from workflows.llm import streams
from workflows.runs import actions as runs
from workflows.runtime import bus
from workflows.store.models import NodeRun, Run

STORY = " ".join(f"word{n}" for n in range(40))
FIRST = "Let me note that first."


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


@pytest.fixture
def stack(transactional_db: Any, llm: FakeLLMServer) -> Iterator[tuple[Runtime, str]]:
    """One worker (it knows the test tools), one scheduler and Daphne."""
    yield from worker_scheduler_and_daphne(
        LLM_BASE_URL=llm.base_url, LLM_MODEL="fake-model", SWITCHYARD_HANDLER_MODULES=MODULES
    )


def note_then_story(llm: FakeLLMServer) -> None:
    """Turn 1: some text and a call of test.record; turn 2: the story, as the final answer."""
    llm.reply = scripted(completion(FIRST, ("test__record", {"note": "first"})), completion(STORY))


def start(tmp_path: Path, max_attempts: int = 1) -> tuple[Run, NodeRun]:
    flow = agent_flow(["test.record"], max_attempts=max_attempts, timeout_seconds=30)
    run, _ = runs.start_run(publish("streamer", flow), {"who": "ana", "log": str(tmp_path / "tools.log")})
    node = wait_for(lambda: NodeRun.objects.filter(run=run, node_id="agent").first(), what="the node row")
    return run, node


def turn_words(node: NodeRun, attempt: int, seq: int) -> int:
    """How many words of turn `seq` the attempt's stream holds (0 before it started)."""
    so_far, _ = streams.read_so_far(node.pk, attempt)
    if not so_far.turn or so_far.turn["seq"] != seq:
        return 0
    return len(so_far.text[so_far.turn_from :].split())


def markers(node: NodeRun, attempt: int) -> list[tuple[int, int, str]]:
    """The turns' boundaries in the attempt's stream (not the `calling` progress within them)."""
    entries = bus.client().xrange(streams.text_key(node.pk, attempt))
    turns = [streams.parse_entry(i, f).turn for i, f in entries]
    return [(t["seq"], t["turn"], t["state"]) for t in turns if t and t["state"] != streams.CALLING]


def test_the_sse_endpoint_replays_and_follows_an_agent_with_its_turn_boundaries(
    stack: tuple[Runtime, str], llm: FakeLLMServer, tmp_path: Path
) -> None:
    _, base = stack
    llm.chunk_delay = 0.08
    note_then_story(llm)
    run, node = start(tmp_path)
    wait_for(lambda: turn_words(node, 1, 3) >= 5, 60, "the second turn to stream a few words")
    assert streams.read_so_far(node.pk, 1)[0].turn["state"] == "started", "connected mid-turn"
    events = list(sse_events(f"{base}/api/v1/runs/{run.pk}/nodes/agent/attempts/1/stream", api_key()))

    turns = [
        (d["seq"], d["turn"], d["state"])
        for name, _, d in events
        if name == "turn" and d["state"] != "calling"
    ]
    assert turns == [(1, 1, "started"), (1, 1, "recorded"), (3, 2, "started"), (3, 2, "recorded")]
    # While turn 1 streamed its tool call, the call grew in `calling` markers, ending whole.
    calling = [(n, d) for n, (name, _, d) in enumerate(events) if name == "turn" and d["state"] == "calling"]
    assert calling and all(d["seq"] == 1 and d["calls"][0]["name"] == "test__record" for _, d in calling)
    assert json.loads(calling[-1][1]["calls"][0]["arguments"]) == {"note": "first"}
    assert len({d["calls"][0]["arguments"] for _, d in calling}) > 1, "seen part-written, then whole"
    first_recorded = next(d for name, _, d in events if name == "turn" and d["state"] == "recorded")
    assert (
        first_recorded["tool_calls"] == ["test__record"] and first_recorded["finish_reason"] == "tool_calls"
    )
    texts = [d for name, _, d in events if name == "text"]
    assert "".join(t["text"] for t in texts if t["turn"] == 1) == FIRST
    assert "".join(t["text"] for t in texts if t["turn"] == 3) == STORY
    assert [t["offset"] for t in texts] == sorted(t["offset"] for t in texts)
    assert len([t for t in texts if t["turn"] == 3]) >= 3, "the second turn: replayed, then followed live"
    position = {f"{d['seq']} {d['state']}": n for n, (name, _, d) in enumerate(events) if name == "turn"}
    inside = [n for n, (name, _, d) in enumerate(events) if name == "text" and d["turn"] == 3]
    assert position["3 started"] < min(inside) and max(inside) < position["3 recorded"]
    assert position["1 started"] < calling[0][0] and calling[-1][0] < position["1 recorded"]
    name, _, end = events[-1]
    assert name == "end" and end["output"]["content"] == STORY and end["output"]["turns"] == 2
    assert wait_finished(run).status == "succeeded"
    assert all(r.json["stream"] is True for r in llm.requests), "every turn was asked as a stream"
    assert tool_log(tmp_path / "tools.log")[0].split()[2] == "first"


def test_a_worker_killed_mid_turn_stream_restarts_the_turn_in_a_new_attempt_repeating_no_finished_call(
    stack: tuple[Runtime, str], llm: FakeLLMServer, tmp_path: Path
) -> None:
    rt, base = stack
    llm.chunk_delay = 0.15
    note_then_story(llm)
    run, node = start(tmp_path, max_attempts=2)
    wait_for(lambda: turn_words(node, 1, 3) >= 5, 60, "the second turn to stream a few words")
    rt.kill("worker-1", signal.SIGKILL)
    llm.chunk_delay = 0.0
    rt.worker("worker-2")

    first = list(sse_events(f"{base}/api/v1/runs/{run.pk}/nodes/agent/attempts/1/stream", api_key()))
    assert first[-1][0] == "end" and first[-1][2]["abandoned"] is True and first[-1][2]["next_attempt"] == 2
    cut = "".join(d["text"] for name, _, d in first if name == "text" and d["turn"] == 3)
    assert cut and STORY.startswith(cut) and cut != STORY
    assert wait_finished(run, 120).status == "succeeded"
    node.refresh_from_db()
    assert node.attempt == 2 and node.output["content"] == STORY
    assert markers(node, 1) == [(1, 1, "started"), (1, 1, "recorded"), (3, 2, "started")]
    assert markers(node, 2) == [(3, 2, "started"), (3, 2, "recorded")], "attempt 2 re-asked turn 2 only"
    assert streams.read_text(node.pk, 2)[0] == STORY, "the re-asked turn streamed afresh: nothing spliced"
    assert [line.split()[2] for line in tool_log(tmp_path / "tools.log")] == ["first"], "the tool ran once"
    sent = bodies(llm)
    assert len(sent) == 3 and sent[1] == sent[2] and sent[0] != sent[1], "only the cut turn was asked again"
    assert [(s.seq, s.kind, s.status, s.attempt) for s in steps(run)] == [
        (1, "turn", "ok", 1),
        (2, "tool", "ok", 1),
        (3, "turn", "ok", 2),
    ]


def test_a_malformed_streamed_tool_call_fails_the_turn_clearly_and_the_retry_asks_again(
    stack: tuple[Runtime, str], llm: FakeLLMServer, tmp_path: Path
) -> None:
    nameless = {"index": 0, "id": "call_x", "function": {"arguments": '{"note": "x"}'}}
    llm.stream_chunks = [
        {"model": "fake-model", "choices": [{"index": 0, "delta": {"tool_calls": [nameless]}}]}
    ]
    asked = []

    def reply(request: Any) -> dict[str, Any]:
        asked.append(request)
        if len(asked) > 1:
            llm.stream_chunks = None  # the provider behaves on the retry
        return completion(STORY)

    llm.reply = reply
    run, node = start(tmp_path, max_attempts=2)
    assert wait_finished(run, 90).status == "succeeded"
    node.refresh_from_db()
    assert node.attempt == 2 and node.output["content"] == STORY
    (failed, answered) = steps(run)
    assert (failed.seq, failed.kind, failed.status, failed.attempt, failed.response) == (
        1,
        "turn",
        "failed",
        1,
        None,
    )
    assert failed.error.startswith(
        "llm.agent node 'agent': provider 'default', model 'fake-model': a malformed"
    )
    assert "tool call 0 (id 'call_x') has no function name" in failed.error
    assert (answered.seq, answered.status, answered.attempt) == (2, "ok", 2)
    assert markers(node, 1) == [(1, 1, "started"), (1, 1, "failed")]
    end = streams.read_text(node.pk, 1)[1]
    assert end is not None and "has no function name" in end["error"]
    # The retry's turn is step 2 and turn 1: a failed turn is a step, not a turn (one numbering).
    assert markers(node, 2) == [(2, 1, "started"), (2, 1, "recorded")]
    assert tool_log(tmp_path / "tools.log") == [], "no tool ran on the malformed call"
