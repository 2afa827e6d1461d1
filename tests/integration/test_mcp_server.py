"""Switchyard as an MCP server: the official MCP client SDK against /mcp on a live Daphne,
with a real worker and scheduler (workflows/mcp_endpoint, workflows/mcp_server)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import Group, User

from tests.integration.conftest import accepts, free_port, publish, wait_finished, worker_scheduler_and_daphne
from tests.integration.mcp_client import connect
from tests.integration.runtime import Runtime, wait_for
from workflows.integrations import keys
from workflows.store.models import Run, Wait

GREET_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "count": {"type": "integer"}},
    "required": ["name"],
}


@pytest.fixture
def stack(transactional_db: Any) -> Iterator[tuple[Runtime, str]]:
    yield from worker_scheduler_and_daphne()


def key_for(role: str, *scopes: str) -> str:
    user = User.objects.create_user(f"{role}-{'-'.join(scopes)}")
    user.groups.add(Group.objects.get_or_create(name=role)[0])
    return keys.create_key(user, "mcp", list(scopes))[1]


def greet_workflow() -> None:
    definition = {
        "description": "Greet someone by name.",
        "input_schema": GREET_SCHEMA,
        "nodes": [{"id": "hello", "handler": "core.echo"}],
        "edges": [],
    }
    publish("greet", definition)


def slow_workflow() -> None:
    """Two quick nodes, then one that takes 3 s: a call waiting 1.5 s sees two end, then answers the id."""
    nodes = [
        {"id": "first", "handler": "core.noop"},
        {"id": "second", "handler": "core.noop"},
        {"id": "nap", "handler": "core.delay", "config": {"seconds": 3}},
    ]
    edges = [{"source": "first", "target": "second"}, {"source": "second", "target": "nap"}]
    publish("slow", {"nodes": nodes, "edges": edges})


def approval_workflow() -> None:
    nodes = [
        {"id": "ask", "handler": "human.approval", "config": {"title": "Ship it?"}},
        {"id": "done", "handler": "core.noop"},
    ]
    publish("gated", {"nodes": nodes, "edges": [{"source": "ask", "target": "done"}]})


def call(base: str, token: str, name: str, arguments: dict[str, Any], **options: Any) -> Any:
    async def go() -> Any:
        async with connect(base, token) as session:
            return await session.call_tool(name, arguments, **options)

    return asyncio.run(go())


def test_tools_list_published_workflows_with_their_input_schemas(stack: tuple[Runtime, str]) -> None:
    greet_workflow()
    publish("no-schema", {"nodes": [{"id": "a", "handler": "core.noop"}], "edges": []})
    token = key_for("viewer", "read")

    async def go() -> tuple[list[Any], list[Any]]:
        async with connect(stack[1], token) as session:
            before = (await session.list_tools()).tools
            await asyncio.to_thread(
                publish, "later", {"nodes": [{"id": "a", "handler": "core.noop"}], "edges": []}
            )
            return before, (await session.list_tools()).tools

    before, after = asyncio.run(go())
    tools = {t.name: t for t in before}
    assert tools["greet"].input_schema == GREET_SCHEMA
    assert "Greet someone by name." in (tools["greet"].description or "")
    assert tools["no-schema"].input_schema == {"type": "object", "additionalProperties": True}
    assert {"switchyard_list_runs", "switchyard_read_run", "switchyard_decide_approval"} <= set(tools)
    assert tools["switchyard_read_run"].annotations.read_only_hint is True
    assert tools["greet"].annotations.read_only_hint is False
    assert "later" not in tools
    assert "later" in {t.name for t in after}  # listed again, a workflow published since is there


def test_calling_a_workflow_tool_starts_a_run_and_answers_its_output(stack: tuple[Runtime, str]) -> None:
    greet_workflow()
    result = call(stack[1], key_for("operator", "run", "read"), "greet", {"name": "Ada", "count": 2})
    assert not result.is_error, result.content
    run = Run.objects.get()
    assert result.structured_content["run_id"] == run.pk
    assert result.structured_content["status"] == "succeeded"
    echoed = {"input": {"name": "Ada", "count": 2}, "upstream": {}, "config": {}}
    assert result.structured_content["output"] == {"hello": echoed}
    assert json.loads(result.content[0].text) == {"hello": echoed}
    assert result.structured_content["url"].endswith(f"/runs/{run.pk}/")


def test_a_failed_run_answers_an_error_naming_its_dead_node(stack: tuple[Runtime, str]) -> None:
    node = {"id": "boom", "handler": "core.fail", "config": {"message": "the printer is on fire"}}
    publish("doomed", {"nodes": [{**node, "retry": {"max_attempts": 1}}], "edges": []})
    result = call(stack[1], key_for("operator", "run"), "doomed", {})
    assert result.is_error
    assert result.structured_content["status"] == "failed"
    assert "boom" in result.content[0].text and "the printer is on fire" in result.content[0].text


def test_the_same_idempotency_key_answers_the_same_run(stack: tuple[Runtime, str]) -> None:
    greet_workflow()
    token = key_for("operator", "run")
    meta = {"io.switchyard/idempotencyKey": "order-17"}
    first = call(stack[1], token, "greet", {"name": "Ada"}, meta=meta)
    again = call(stack[1], token, "greet", {"name": "Ada"}, meta=meta)
    assert first.structured_content["run_id"] == again.structured_content["run_id"]
    assert Run.objects.count() == 1


def test_a_long_run_answers_its_id_and_sends_progress_as_nodes_end(stack: tuple[Runtime, str]) -> None:
    slow_workflow()
    token = key_for("operator", "run", "read")
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    meta = {"io.switchyard/waitSeconds": 1.5}
    result = call(stack[1], token, "slow", {}, meta=meta, progress_callback=on_progress)
    run = Run.objects.get()
    assert not result.is_error
    assert result.structured_content["run_id"] == run.pk
    assert result.structured_content["status"] == "running"
    assert f"/runs/{run.pk}/" in result.content[0].text
    assert seen and seen[-1][0] == 2 and seen[-1][1] == 3, seen
    assert "second" in (seen[-1][2] or "")
    wait_finished(run)

    read = call(stack[1], token, "switchyard_read_run", {"run_id": run.pk})
    assert read.structured_content["status"] == "succeeded"
    assert [n["node_id"] for n in read.structured_content["nodes"]] == ["first", "second", "nap"]
    assert {n["status"] for n in read.structured_content["nodes"]} == {"succeeded"}
    assert read.structured_content["output"] == {"nap": {"slept": 3}}


def test_list_runs_filters_by_workflow_and_status(stack: tuple[Runtime, str]) -> None:
    greet_workflow()
    slow_workflow()
    token = key_for("operator", "run", "read")
    call(stack[1], token, "greet", {"name": "Ada"})
    call(stack[1], token, "greet", {"name": "Bo"})
    call(stack[1], token, "slow", {}, meta={"io.switchyard/waitSeconds": 0})
    listed = call(
        stack[1], token, "switchyard_list_runs", {"workflow": "greet", "status": "succeeded", "limit": 1}
    )
    runs = listed.structured_content["runs"]
    newest_greet = Run.objects.filter(workflow__slug="greet").order_by("-id").first()
    assert [r["run_id"] for r in runs] == [newest_greet.pk]


def test_an_approval_of_a_waiting_run_is_decided_over_mcp(stack: tuple[Runtime, str]) -> None:
    approval_workflow()
    token = key_for("operator", "run", "read", "operate")
    started = call(stack[1], token, "gated", {}, meta={"io.switchyard/waitSeconds": 0})
    run = Run.objects.get(pk=started.structured_content["run_id"])
    wait_for(
        lambda: Wait.objects.filter(run=run, closed_at__isnull=True).exists(), 30, "the approval to wait"
    )
    read = call(stack[1], token, "switchyard_read_run", {"run_id": run.pk})
    approval = read.structured_content["approvals"][0]
    assert approval["node_id"] == "ask"
    decided = call(
        stack[1],
        token,
        "switchyard_decide_approval",
        {"approval_id": approval["approval_id"], "decision": "approve", "comment": "looks right"},
    )
    assert not decided.is_error, decided.content
    assert decided.structured_content["outcome"] == "decided"
    assert wait_finished(run).status == "succeeded"


def test_deciding_needs_the_operate_scope(stack: tuple[Runtime, str]) -> None:
    approval_workflow()
    started = call(stack[1], key_for("operator", "run"), "gated", {}, meta={"io.switchyard/waitSeconds": 0})
    refused = call(
        stack[1],
        key_for("operator", "read"),
        "switchyard_decide_approval",
        {"run_id": started.structured_content["run_id"], "decision": "approve"},
    )
    assert refused.is_error
    assert "'operate' scope" in refused.content[0].text


def test_a_key_without_the_run_scope_cannot_start_runs(stack: tuple[Runtime, str]) -> None:
    greet_workflow()
    result = call(stack[1], key_for("operator", "read"), "greet", {"name": "Ada"})
    assert result.is_error
    assert "'run' scope" in result.content[0].text
    assert not Run.objects.exists()


def test_a_key_without_the_read_scope_cannot_read_runs(stack: tuple[Runtime, str]) -> None:
    result = call(stack[1], key_for("operator", "run"), "switchyard_list_runs", {})
    assert result.is_error
    assert "'read' scope" in result.content[0].text


def test_bad_arguments_are_refused_naming_the_field(stack: tuple[Runtime, str]) -> None:
    greet_workflow()
    token = key_for("operator", "run", "read")
    wrong = call(stack[1], token, "greet", {"name": "Ada", "count": "two"})
    assert wrong.is_error
    assert "input.count" in wrong.content[0].text
    missing = call(stack[1], token, "greet", {})
    assert missing.is_error and "input.name" in missing.content[0].text
    bad_id = call(stack[1], token, "switchyard_read_run", {"run_id": "seven"})
    assert bad_id.is_error and "run_id" in bad_id.content[0].text
    assert not Run.objects.exists()


def test_no_key_or_a_wrong_key_is_a_401_a_foreign_host_a_400_and_no_get_stream(
    stack: tuple[Runtime, str],
) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    accept = {"Accept": "application/json, text/event-stream"}
    anonymous = httpx.post(f"{stack[1]}/mcp", json=body, headers=accept)
    assert anonymous.status_code == 401
    assert anonymous.headers["WWW-Authenticate"].startswith("Bearer")
    assert "Authorization: Bearer" in anonymous.json()["error"]["message"]
    wrong = httpx.post(
        f"{stack[1]}/mcp", json=body, headers={**accept, "Authorization": "Bearer sy_00000000_nope"}
    )
    assert wrong.status_code == 401
    stream = httpx.get(f"{stack[1]}/mcp", headers={"Accept": "text/event-stream"})
    assert stream.status_code == 405 and stream.headers["Allow"] == "POST"
    rebound = httpx.post(f"{stack[1]}/mcp", json=body, headers={**accept, "Host": "attacker.example"})
    assert rebound.status_code == 400 and "attacker.example" in rebound.json()["error"]["message"]


@pytest.fixture
def strict_stack(transactional_db: Any) -> Iterator[tuple[Runtime, str]]:
    """The stack with a rate limit of 3 requests a minute per key."""
    yield from worker_scheduler_and_daphne(SWITCHYARD_API_RATE_LIMIT_PER_MINUTE="3")


def test_the_rest_apis_rate_and_body_limits_hold_at_mcp(strict_stack: tuple[Runtime, str]) -> None:
    url, token = f"{strict_stack[1]}/mcp", key_for("operator", "run", "read")
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"}
    too_big = httpx.post(url, content=b"[" + b" " * (3 * 1024 * 1024) + b"]", headers=headers)
    assert too_big.status_code == 413
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    # Up to two windows' worth: the one-minute window may turn over between two requests.
    answers = [httpx.post(url, json=ping, headers=headers) for _ in range(7)]
    statuses = [a.status_code for a in answers]
    assert 429 in statuses, statuses
    refused = answers[statuses.index(429)]
    assert int(refused.headers["Retry-After"]) > 0
    assert "Rate limit of 3 requests per minute" in refused.json()["error"]["message"]


def rpc(url: str, token: str, method: str, params: dict[str, Any], **headers: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    accept = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"}
    return httpx.post(url, json=body, headers={**accept, **headers}, timeout=30)


def message_of(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC answer, from a JSON body or the SSE stream's last data line."""
    if response.headers["content-type"].startswith("application/json"):
        answer: dict[str, Any] = response.json()
        return answer
    data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    return dict(json.loads(data[-1]))


def test_versions_are_negotiated_and_any_web_process_serves_any_request(stack: tuple[Runtime, str]) -> None:
    """Stateless: no Mcp-Session-Id; a second Daphne answers a call after the first answered initialize."""
    runtime, first = stack
    port = free_port()
    runtime.web("daphne-2", port)
    wait_for(lambda: accepts(port), 30, "the second Daphne to listen")
    second = f"http://127.0.0.1:{port}"
    greet_workflow()
    token = key_for("operator", "run")
    hello = {"capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    known = rpc(f"{first}/mcp", token, "initialize", {**hello, "protocolVersion": "2025-06-18"})
    assert known.status_code == 200 and "mcp-session-id" not in known.headers
    assert message_of(known)["result"]["protocolVersion"] == "2025-06-18"
    unknown = rpc(f"{first}/mcp", token, "initialize", {**hello, "protocolVersion": "1999-01-01"})
    assert message_of(unknown)["result"]["protocolVersion"] == "2025-11-25"  # the server's latest
    called = rpc(
        f"{second}/mcp",
        token,
        "tools/call",
        {"name": "greet", "arguments": {"name": "Ada"}},
        **{"Mcp-Protocol-Version": "2025-06-18"},
    )
    result = message_of(called)["result"]
    assert result["isError"] is False and result["structuredContent"]["status"] == "succeeded"


def test_postgresql_away_is_a_503_with_retry_after(transactional_db: Any) -> None:
    """Daphne alone, its DATABASE_URL at a port nothing listens on: the key cannot be checked."""
    port, dead = free_port(), free_port()
    runtime = Runtime(DATABASE_URL=f"postgres://switchyard@127.0.0.1:{dead}/nowhere")
    runtime.web("daphne-no-db", port)
    try:
        wait_for(lambda: accepts(port), 30, "Daphne to listen")
        away = rpc(f"http://127.0.0.1:{port}/mcp", "sy_00000000_whatever", "tools/list", {})
        assert away.status_code == 503
        assert int(away.headers["Retry-After"]) > 0
        assert "PostgreSQL is unavailable" in away.json()["error"]["message"]
    finally:
        runtime.stop()
