"""Nodes that wait, end to end: real Postgres, real Redis, real RQ workers and schedulers."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.utils import timezone

from tests.integration.conftest import publish, wait_finished
from tests.integration.runtime import Runtime, wait_for
from workflows.runs import actions as runs
from workflows.runtime import bus, reconciler
from workflows.store.errors import Conflict, Forbidden, Invalid
from workflows.store.models import AuditEntry, DeadLetter, NodeRun, PostedEvent, Run, RunEvent, Wait
from workflows.waits import approvals, waiting as waits

FORM = {"type": "object", "properties": {"reason": {"type": "string", "minLength": 3}}}


def refund_flow(**approval: Any) -> dict[str, Any]:
    config = {
        "title": "Refund?",
        "form": FORM,
        "propose": "output.input",
        "approvers": {"groups": ["support"]},
    }
    return {
        "nodes": [
            {"id": "draft", "handler": "core.echo"},
            {"id": "ok", "handler": "human.approval", "config": {**config, **approval}},
            {"id": "pay", "handler": "core.noop"},
            {"id": "tell", "handler": "core.noop"},
        ],
        "edges": [
            {"source": "draft", "target": "ok"},
            {"source": "ok", "target": "pay", "when": "output.approved"},
            {"source": "ok", "target": "tell", "when": "not output.approved"},
        ],
    }


def one_wait(handler: str, config: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodes": [{"id": "w", "handler": handler, "config": config}, {"id": "after", "handler": "core.echo"}],
        "edges": [{"source": "w", "target": "after"}],
    }


def person(name: str, *groups: str) -> User:
    user = User.objects.create_user(name, password="x")
    for group in groups:
        user.groups.add(Group.objects.get_or_create(name=group)[0])
    return user


def waiting(run: Run, node_id: str = "ok", timeout: float = 30.0) -> Wait:
    def found() -> Wait | None:
        return Wait.objects.filter(run=run, node_id=node_id, closed_at__isnull=True).first()

    return wait_for(found, timeout, f"{node_id} of run {run.pk} to wait")


def statuses(run: Run) -> dict[str, str]:
    return dict(NodeRun.objects.filter(run=run).values_list("node_id", "status"))


@pytest.mark.parametrize(
    ("decision", "runs_next", "skipped"), [("approve", "pay", "tell"), ("reject", "tell", "pay")]
)
def test_a_decision_is_the_output_and_successors_branch_on_it(
    runtime: Runtime, decision: str, runs_next: str, skipped: str
) -> None:
    workflow = publish("refund", refund_flow())
    run, _ = runs.start_run(workflow, {"amount": 30})
    wait = waiting(run)
    assert statuses(run)["ok"] == "waiting" and wait.proposed == {"amount": 30}
    agent = person("ana", "support", "viewer")
    approvals.decide(wait.pk, agent, decision, {"reason": "looks fine"}, comment="ok by me")
    assert wait_finished(run).status == "succeeded"
    assert (statuses(run)[runs_next], statuses(run)[skipped]) == ("succeeded", "skipped")
    output = NodeRun.objects.get(run=run, node_id="ok").output
    assert (output["by"], output["fields"], output["comment"]) == (
        "ana",
        {"reason": "looks fine"},
        "ok by me",
    )
    assert output["decision"] == ("approved" if decision == "approve" else "rejected")
    assert AuditEntry.objects.filter(action="approval.decide", target_id=str(wait.pk)).exists()
    assert RunEvent.objects.filter(run=run, kind="approval.decided").count() == 1


def test_the_approver_edits_the_proposed_data_before_approving(runtime: Runtime) -> None:
    workflow = publish("refund", refund_flow())
    run, _ = runs.start_run(workflow, {"amount": 30, "to": "bob"})
    wait = waiting(run)
    approvals.decide(
        wait.pk, person("ana", "support", "viewer"), "approve", {}, data={"amount": 25, "to": "bob"}
    )
    assert wait_finished(run).status == "succeeded"
    output = NodeRun.objects.get(run=run, node_id="ok").output
    assert output["data"] == {"amount": 25, "to": "bob"}
    assert output["edited"] == {"amount": {"from": 30, "to": 25}}


def test_bad_decisions_are_refused_by_reason_and_change_nothing(runtime: Runtime) -> None:
    workflow = publish("refund", refund_flow(timeout_seconds=3600))
    run, _ = runs.start_run(workflow, {"amount": 30})
    wait = waiting(run)
    ana, stranger = person("ana", "support", "viewer"), person("zed", "viewer")
    with pytest.raises(Forbidden, match="zed may not decide"):
        approvals.decide(wait.pk, stranger, "approve")
    with pytest.raises(Invalid) as bad_fields:
        approvals.decide(wait.pk, ana, "approve", {"reason": "no"})
    assert [i.path for i in bad_fields.value.issues] == ["fields.reason"]
    with pytest.raises(Invalid, match="decision must be"):
        approvals.decide(wait.pk, ana, "maybe")
    with pytest.raises(Conflict, match="timed out"):
        approvals.decide(wait.pk, ana, "approve", now=timezone.now() + timedelta(hours=2))
    assert statuses(run)["ok"] == "waiting" and Wait.objects.get(pk=wait.pk).closed_at is None
    approvals.decide(wait.pk, ana, "approve")
    with pytest.raises(Conflict, match="already decided"):
        approvals.decide(wait.pk, ana, "reject")
    assert wait_finished(run).status == "succeeded"
    assert NodeRun.objects.get(run=run, node_id="ok").output["decision"] == "approved"


@pytest.mark.parametrize(
    ("policy", "run_status", "node"),
    [("fail", "failed", "dead"), ("approve", "succeeded", "succeeded"), ("reject", "succeeded", "succeeded")],
)
def test_each_timeout_policy(runtime: Runtime, policy: str, run_status: str, node: str) -> None:
    workflow = publish("refund", refund_flow(timeout_seconds=0.3, on_timeout=policy))
    run, _ = runs.start_run(workflow, {"amount": 30})
    assert wait_finished(run).status == run_status
    assert statuses(run)["ok"] == node
    if policy == "fail":
        assert "timed out" in DeadLetter.objects.get(run=run, node_id="ok").error
    else:
        taken = "pay" if policy == "approve" else "tell"
        assert statuses(run)[taken] == "succeeded"
        assert NodeRun.objects.get(run=run, node_id="ok").output["by"] == "system"


def test_an_approval_past_its_sla_is_escalated_once_and_says_so(runtime: Runtime) -> None:
    config = {"due_seconds": 0.3, "escalate_to": {"users": ["boss"]}, "escalation": "reassign"}
    workflow = publish("refund", refund_flow(**config))
    run, _ = runs.start_run(workflow, {"amount": 30})
    wait = waiting(run)
    boss, ana = person("boss", "viewer"), person("ana", "support", "viewer")
    assert not approvals.can_decide(boss, wait)
    wait_for(lambda: Wait.objects.get(pk=wait.pk).escalated_at, 20, "the escalation")
    wait.refresh_from_db()
    assert wait.users == ["boss"] and not approvals.can_decide(ana, wait)
    events = RunEvent.objects.filter(run=run, kind="approval.escalated")
    assert events.count() == 1 and events[0].data["how"] == "reassigned"
    assert [w.pk for w in approvals.inbox(boss)] == [wait.pk] and approvals.inbox(ana) == []
    approvals.decide(wait.pk, boss, "approve")
    assert wait_finished(run).status == "succeeded"


def test_two_schedulers_fire_each_deadline_once(runtime: Runtime) -> None:
    runtime.scheduler("scheduler-2")
    runtime.wait_ready()
    workflow = publish("timers", one_wait("wait.timer", {"seconds": 0.3}))
    started = [runs.start_run(workflow, {"i": i})[0] for i in range(20)]
    for run in started:
        assert wait_finished(run).status == "succeeded"
    fired = RunEvent.objects.filter(run__in=started, kind="node.expired")
    assert fired.count() == 20 and set(fired.values_list("attempt", flat=True)) == {1}
    assert set(NodeRun.objects.filter(run__in=started, node_id="w").values_list("attempt", flat=True)) == {1}


def test_a_timer_waits_until_a_time_computed_from_the_input(runtime: Runtime) -> None:
    workflow = publish("until", one_wait("wait.timer", {"until": "input.at"}))
    at = (timezone.now() + timedelta(milliseconds=300)).isoformat()
    run, _ = runs.start_run(workflow, {"at": at})
    assert wait_finished(run).status == "succeeded"
    assert NodeRun.objects.get(run=run, node_id="w").output == {"waited_until": at}


def test_an_event_after_the_wait_wakes_every_waiter_and_its_payload_is_the_output(runtime: Runtime) -> None:
    workflow = publish("orders", one_wait("wait.event", {"key": "input.order_id"}))
    first, second = (runs.start_run(workflow, {"order_id": 7, "n": n})[0] for n in (1, 2))
    waiting(first, "w"), waiting(second, "w")
    posted = waits.post_event(7, {"paid": True}, source="test")
    assert sorted(posted.woken_runs) == sorted([first.pk, second.pk]) and not posted.retained
    for run in (first, second):
        assert wait_finished(run).status == "succeeded"
        assert NodeRun.objects.get(run=run, node_id="w").output == {"paid": True}


def test_an_event_before_the_wait_is_kept_and_consumed_once(runtime: Runtime) -> None:
    posted = waits.post_event("order-9", {"paid": 9})
    assert posted.retained and posted.woken_runs == []
    workflow = publish("orders", one_wait("wait.event", {"key": "input.order_ref"}))
    run, _ = runs.start_run(workflow, {"order_ref": "order-9"})
    assert wait_finished(run).status == "succeeded"
    assert NodeRun.objects.get(run=run, node_id="w").output == {"paid": 9}
    assert not PostedEvent.objects.get(pk=posted.event_id).retained
    later, _ = runs.start_run(workflow, {"order_ref": "order-9", "again": True})
    waiting(later, "w")
    assert statuses(later)["w"] == "waiting"


def test_first_only_wakes_the_oldest_waiter_per_event(runtime: Runtime) -> None:
    workflow = publish("queue", one_wait("wait.event", {"key": "input.q", "first_only": True}))
    first, second = (runs.start_run(workflow, {"q": "jobs", "n": n})[0] for n in (1, 2))
    waiting(first, "w"), waiting(second, "w")
    assert waits.post_event("jobs", {"n": 1}).woken_runs == [first.pk]
    assert wait_finished(first).status == "succeeded" and statuses(second)["w"] == "waiting"
    assert waits.post_event("jobs", {"n": 2}).woken_runs == [second.pk]
    assert wait_finished(second).status == "succeeded"


def test_cancelling_a_run_cancels_its_waits(runtime: Runtime) -> None:
    workflow = publish("refund", refund_flow())
    run, _ = runs.start_run(workflow, {"amount": 30})
    wait = waiting(run)
    runs.cancel_run(run.pk)
    assert statuses(run)["ok"] == "cancelled"
    assert Wait.objects.get(pk=wait.pk).outcome == "cancelled"
    assert approvals.inbox(person("ana", "support", "viewer")) == []
    with pytest.raises(Conflict):
        approvals.decide(wait.pk, User.objects.get(username="ana"), "approve")


def test_decision_links_refuse_forged_expired_and_replayed_tokens(runtime: Runtime) -> None:
    workflow = publish("refund", refund_flow())
    run, _ = runs.start_run(workflow, {"amount": 30})
    wait = waiting(run)
    ana = person("ana", "support", "viewer")
    token = approvals.decision_link_token(wait, ana, "approve")
    with pytest.raises(approvals.LinkRefused, match="signature"):
        approvals.decide_by_link(token[:-2] + ("AA" if not token.endswith("AA") else "BB"))
    with pytest.raises(approvals.LinkRefused, match="expired"):
        approvals.decide_by_link(approvals.decision_link_token(wait, ana, "reject", ttl_seconds=-1))
    assert approvals.decide_by_link(token).pk == wait.pk
    with pytest.raises(approvals.LinkRefused, match="already used"):
        approvals.decide_by_link(token)
    assert wait_finished(run).status == "succeeded"
    assert NodeRun.objects.get(run=run, node_id="ok").output["via"] == "link"


def test_runs_waiting_through_kill_9_of_every_process_all_continue_after_their_decisions(
    runtime: Runtime,
) -> None:
    workflow = publish("refund", refund_flow())
    started = [runs.start_run(workflow, {"amount": i})[0] for i in range(100)]
    wait_for(lambda: Wait.objects.filter(run__in=started).count() == 100, 60, "100 waits")
    for name in ("worker-1", "worker-2", "scheduler-1"):
        runtime.kill(name)
    runtime.worker("worker-3")
    runtime.scheduler("scheduler-3")
    runtime.wait_ready()
    assert NodeRun.objects.filter(run__in=started, node_id="ok", status="waiting").count() == 100
    ana = person("ana", "support", "viewer")
    for wait in Wait.objects.filter(run__in=started):
        approvals.decide(wait.pk, ana, "approve")
    for run in started:
        assert wait_finished(run).status == "succeeded"
    assert NodeRun.objects.filter(run__in=started, node_id="pay", status="succeeded").count() == 100


def test_a_redis_flush_while_waiting_loses_nothing(runtime: Runtime) -> None:
    workflow = publish("orders", one_wait("wait.event", {"key": "input.order_id"}))
    run, _ = runs.start_run(workflow, {"order_id": "r1"})
    waiting(run, "w")
    bus.client().flushdb()
    bus.ensure_group()
    assert statuses(run)["w"] == "waiting"
    waits.post_event("r1", {"ok": 1})
    assert wait_finished(run).status == "succeeded"


def test_the_inbox_lists_what_the_viewer_may_decide_by_due_time_overdue_marked(runtime: Runtime) -> None:
    soon = publish("soon", refund_flow(due_seconds=0.01))
    later = publish("later", refund_flow(due_seconds=3600))
    r1, _ = runs.start_run(later, {"amount": 1})
    r2, _ = runs.start_run(soon, {"amount": 2})
    w1, w2 = waiting(r1), waiting(r2)
    ana = person("ana", "support", "viewer")
    listed = approvals.inbox(ana, now=timezone.now() + timedelta(seconds=1))
    assert [w.pk for w in listed] == [w2.pk, w1.pk]
    assert [w.overdue for w in listed] == [True, False]
    assert [w.pk for w in approvals.inbox(ana, approvals.InboxFilters(workflow="later"))] == [w1.pk]
    assert approvals.inbox(person("zed", "viewer")) == []


def test_a_run_counts_its_waiting_nodes_and_the_stalled_run_scan_skips_it(runtime: Runtime) -> None:
    workflow = publish("refund", refund_flow())
    run, _ = runs.start_run(workflow, {"amount": 30})
    wait = waiting(run)
    run.refresh_from_db()
    assert run.waiting_nodes == 1
    with connection.cursor() as cur:  # `after` 0: any running run with nothing in flight is stalled
        cur.execute(reconciler.STALLED_RUNS_SQL, {"after": 0, "limit": 100})
        assert run.pk not in [row[0] for row in cur.fetchall()]
    approvals.decide(wait.pk, person("ana", "support", "viewer"), "approve", {"reason": "looks fine"})
    assert wait_finished(run).status == "succeeded"
    run.refresh_from_db()
    assert run.waiting_nodes == 0
