"""Wait nodes in the pure core: the table's moves, the engine's decisions, plans and checks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from workflows.core import engine, waits as core
from workflows.core.definition import parse_definition, validate_definition
from workflows.core.engine import NodeState, WaitNode
from workflows.core.states import NODE_IN_FLIGHT, NODE_TERMINAL, Cause, NodeStatus as N, can_move_node

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
SCHEMAS: dict[str, Any] = {"core.noop": None, **core.SCHEMAS}


def graph(*nodes: dict[str, Any], edges: list[dict[str, Any]] | None = None) -> Any:
    return parse_definition({"nodes": list(nodes), "edges": edges or []}, SCHEMAS)


def approval_flow() -> Any:
    return graph(
        {"id": "draft", "handler": "core.noop"},
        {"id": "ok", "handler": "human.approval", "config": {"propose": "output.refund"}},
        {"id": "pay", "handler": "core.noop"},
        {"id": "tell", "handler": "core.noop"},
        edges=[
            {"source": "draft", "target": "ok"},
            {"source": "ok", "target": "pay", "when": "output.decision == 'approved'"},
            {"source": "ok", "target": "tell", "when": "output.decision == 'rejected'"},
        ],
    )


def test_waiting_is_neither_in_flight_nor_terminal() -> None:
    assert N.WAITING not in NODE_IN_FLIGHT and N.WAITING not in NODE_TERMINAL


@pytest.mark.parametrize(
    ("cause", "source", "target", "allowed"),
    [
        (Cause.WAIT, N.PENDING, N.WAITING, True),
        (Cause.WAIT, N.RETRYING, N.WAITING, True),
        (Cause.DECIDE, N.WAITING, N.SUCCEEDED, True),
        (Cause.EVENT, N.WAITING, N.SUCCEEDED, True),
        (Cause.EXPIRE, N.WAITING, N.SUCCEEDED, True),
        (Cause.EXPIRE, N.WAITING, N.FAILED, True),
        (Cause.CANCEL, N.WAITING, N.CANCELLED, True),
        (Cause.DECIDE, N.WAITING, N.FAILED, False),
        (Cause.CLAIM, N.PENDING, N.WAITING, False),
        (Cause.START, N.WAITING, N.RUNNING, False),
        (Cause.DECIDE, N.SUCCEEDED, N.SUCCEEDED, False),
    ],
)
def test_the_table_allows_exactly_the_waiting_moves(
    cause: Cause, source: N, target: N, allowed: bool
) -> None:
    assert can_move_node(cause, source, target) is allowed


def test_a_ready_wait_node_is_decided_waiting_not_enqueued() -> None:
    g = approval_flow()
    states = {
        "draft": NodeState(N.SUCCEEDED, 1, {"refund": 5}),
        **{n: NodeState(N.PENDING) for n in ("ok", "pay", "tell")},
    }
    assert engine.advance(g, states) == [WaitNode("ok")]


def test_a_run_with_a_waiting_node_is_not_finished() -> None:
    g = approval_flow()
    states = {
        "draft": NodeState(N.SUCCEEDED, 1),
        "ok": NodeState(N.WAITING, 1),
        "pay": NodeState(N.PENDING),
        "tell": NodeState(N.PENDING),
    }
    assert engine.advance(g, states) == []


@pytest.mark.parametrize(
    ("decision", "runs", "skipped"), [("approved", "pay", "tell"), ("rejected", "tell", "pay")]
)
def test_successors_branch_on_the_decision(decision: str, runs: str, skipped: str) -> None:
    g = approval_flow()
    states = {
        "draft": NodeState(N.SUCCEEDED, 1),
        "ok": NodeState(N.SUCCEEDED, 1, {"decision": decision}),
        "pay": NodeState(N.PENDING),
        "tell": NodeState(N.PENDING),
    }
    decisions = engine.advance(g, states)
    assert engine.EnqueueNode(runs) in decisions and engine.SkipNode(skipped, N.SKIPPED) in decisions


def test_a_timed_out_approval_that_fails_is_retried_then_dead_like_a_task() -> None:
    g = graph({"id": "ok", "handler": "human.approval", "retry": {"max_attempts": 2}})
    assert isinstance(engine.advance(g, {"ok": NodeState(N.FAILED, 1)})[0], engine.RetryNode)
    assert engine.advance(g, {"ok": NodeState(N.FAILED, 2)})[:1] == [engine.KillNode("ok", 2)]


def test_the_definition_gives_wait_nodes_their_kind() -> None:
    g = approval_flow()
    assert (g.nodes["ok"].kind, g.nodes["draft"].kind) == ("human.approval", "task")


@pytest.mark.parametrize(
    ("handler", "config", "path"),
    [
        ("wait.event", {"key": "input.order_id("}, "nodes[0].config.key"),
        ("wait.event", {}, "nodes[0].config"),
        ("wait.timer", {}, "nodes[0].config.seconds"),
        ("wait.timer", {"seconds": 5, "until": "input.at"}, "nodes[0].config.seconds"),
        ("human.approval", {"form": {"type": 12}}, "nodes[0].config.form"),
        ("human.approval", {"on_timeout": "explode"}, "nodes[0].config.on_timeout"),
    ],
)
def test_bad_wait_configs_are_refused_naming_the_node_and_field(
    handler: str, config: dict[str, Any], path: str
) -> None:
    issues = validate_definition({"nodes": [{"id": "w", "handler": handler, "config": config}]}, SCHEMAS)
    assert [i.path for i in issues] == [path], issues
    assert all(i.node == "w" for i in issues)


def test_an_event_key_is_computed_from_the_input_or_the_upstream_output() -> None:
    plan = core.plan_wait("wait.event", {"key": "input.order_id"}, {"order_id": 42}, None, NOW)
    assert plan.key == "42"
    plan = core.plan_wait("wait.event", {"key": "output.ref"}, {}, {"ref": "A-1"}, NOW)
    assert plan.key == "A-1"
    assert core.plan_wait("wait.event", {"key": "input.nope"}, {}, None, NOW).error


def test_a_timer_waits_a_duration_or_until_a_computed_time() -> None:
    assert core.plan_wait("wait.timer", {"seconds": 30}, {}, None, NOW).expires_at == NOW + timedelta(
        seconds=30
    )
    until = core.plan_wait(
        "wait.timer", {"until": "input.at"}, {"at": "2025-02-01T00:00:00+00:00"}, None, NOW
    )
    assert until.expires_at == datetime(2025, 2, 1, tzinfo=UTC)
    assert core.plan_wait("wait.timer", {"until": "input.at"}, {"at": "soon"}, None, NOW).error


def test_an_approval_escalates_only_when_it_has_someone_to_escalate_to() -> None:
    config = {"due_seconds": 60, "timeout_seconds": 120}
    plan = core.plan_wait("human.approval", config, {}, None, NOW)
    assert (plan.sla_at, plan.escalate_at, plan.next_deadline) == (
        NOW + timedelta(seconds=60),
        None,
        NOW + timedelta(seconds=120),
    )
    plan = core.plan_wait("human.approval", {**config, "escalate_to": {"users": ["boss"]}}, {}, None, NOW)
    assert plan.next_deadline == NOW + timedelta(seconds=60)


def test_form_errors_name_the_field_and_edits_say_what_changed() -> None:
    form = {"type": "object", "required": ["reason"], "properties": {"amount": {"type": "number"}}}
    assert [p for p, _ in core.form_errors(form, {"amount": "x"})] == ["fields", "fields.amount"]
    assert core.edits_of({"amount": 5, "to": "a"}, {"amount": 4, "to": "a"}) == {
        "amount": {"from": 5, "to": 4}
    }
    assert core.edits_of({"amount": 5}, None) == {}
