"""An agent node's steps in the run page's node panel and in the API (no workers needed)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from tests.integration.conftest import publish
from workflows.runs import actions as runs
from workflows.store.models import AgentStep, NodeRun


def agent_run_with_steps(status: str) -> NodeRun:
    config = {"prompt": "hi", "tools": ["demo.get_weather"]}
    run, _ = runs.start_run(
        publish("agent-panel", {"nodes": [{"id": "agent", "handler": "llm.agent", "config": config}]}), {}
    )
    node = NodeRun.objects.get(run=run, node_id="agent")
    NodeRun.objects.filter(pk=node.pk).update(status=status, attempt=1)
    t0 = timezone.now()
    common = {"node_run": node, "fingerprint": "f", "attempt": 1}
    calls = [{"id": "c1", "name": "demo__get_weather", "arguments": '{"city": "<b>Lisbon</b>"}'}]
    AgentStep.objects.create(
        **common, seq=1, kind="turn", status="ok", idempotency_key="k:turn:1", model="m-1",
        response={"content": "", "tool_calls": calls}, input_tokens=9, output_tokens=2,
        started_at=t0, finished_at=t0 + timedelta(milliseconds=300),
    )  # fmt: skip
    AgentStep.objects.create(
        **common, seq=2, kind="tool", status="ok", idempotency_key="k:tool:1.0", tool="demo.get_weather",
        call_id="c1", turn_seq=1, arguments={"city": "<b>Lisbon</b>"}, result={"sky": "sunny"},
        started_at=t0 + timedelta(milliseconds=300), finished_at=t0 + timedelta(milliseconds=320),
    )  # fmt: skip
    return node


def test_the_node_panel_nests_tool_calls_under_their_turn_escaped_and_polls_while_running(
    db: None, redis_clean: None, client_as: Any
) -> None:
    node = agent_run_with_steps("running")
    viewer = client_as("viewer")
    page = viewer.get(f"/runs/{node.run_id}/nodes/agent/")
    html = page.content.decode()
    assert page.status_code == 200
    assert 'class="agent-step depth-0 turn ok"' in html and 'class="agent-step depth-1 tool ok"' in html
    assert "9 → 2 tokens" in html and "demo.get_weather" in html
    assert "&lt;b&gt;Lisbon&lt;/b&gt;" in html and "<b>Lisbon</b>" not in html
    assert 'hx-trigger="every 1s"' in html
    steps = viewer.get(f"/runs/{node.run_id}/nodes/agent/steps/").content.decode()
    assert 'hx-trigger="every 1s"' in steps and 'hx-trigger="load"' not in steps


def test_a_finished_loop_stops_polling_and_reloads_the_panel_once(
    db: None, redis_clean: None, client_as: Any
) -> None:
    node = agent_run_with_steps("succeeded")
    steps = client_as("viewer").get(f"/runs/{node.run_id}/nodes/agent/steps/").content.decode()
    assert 'hx-trigger="every 1s"' not in steps and 'hx-trigger="load"' in steps
    assert client_as(None).get(f"/runs/{node.run_id}/nodes/agent/steps/").status_code == 403  # no role


def test_the_api_gives_a_nodes_steps_in_order(db: None, redis_clean: None, client_as: Any) -> None:
    node = agent_run_with_steps("succeeded")
    viewer = client_as("viewer")
    body = viewer.get(f"/api/v1/runs/{node.run_id}/nodes/agent/steps").json()
    assert [(s["seq"], s["kind"], s["tool"]) for s in body["steps"]] == [
        (1, "turn", ""),
        (2, "tool", "demo.get_weather"),
    ]
    assert body["steps"][0]["input_tokens"] == 9 and body["steps"][1]["result"] == {"sky": "sunny"}
    missing = viewer.get(f"/api/v1/runs/{node.run_id}/nodes/nope/steps")
    assert missing.status_code == 404 and "no node 'nope'" in missing.json()["detail"]
