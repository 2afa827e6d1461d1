"""Child runs (`workflow.run`), end to end: real Postgres, Redis, RQ workers and schedulers."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from tests.integration.conftest import node, publish, wait_finished
from tests.integration.runtime import Runtime, wait_for
from workflows.runs import actions as runs
from workflows.store.errors import Invalid
from workflows.store.models import ChildRun, DeadLetter, NodeRun, Run, Workflow
from workflows.versions import publish as versions


def call(node_id: str, slug: str, retry: dict[str, Any] | None = None, **config: Any) -> dict[str, Any]:
    fields = {"retry": retry} if retry else {}
    return node(node_id, "workflow.run", config={"workflow": slug, **config}, **fields)


def child_of(run: Run, node_id: str = "call", timeout: float = 30.0) -> Run:
    def found() -> Run | None:
        link = ChildRun.objects.filter(parent_run=run, node_id=node_id).order_by("-attempt").first()
        return link.child if link else None

    return wait_for(found, timeout, f"{node_id} of run {run.pk} to start its child")


def outputs(run: Run) -> dict[str, Any]:
    return dict(NodeRun.objects.filter(run=run).values_list("node_id", "output"))


ENRICH = {
    "nodes": [node("look", "core.echo"), node("shape", "core.echo")],
    "edges": [{"source": "look", "target": "shape"}],
}


def triage() -> dict[str, Any]:
    return {
        "nodes": [
            node("first", "core.echo"),
            call("call", "enrich", input={"customer": "{input.customer}", "seen": "{upstream.first.input}"}),
            node("after", "core.echo"),
        ],
        "edges": [{"source": "first", "target": "call"}, {"source": "call", "target": "after"}],
    }


def test_a_child_run_finishing_gives_the_parent_node_its_output(runtime: Runtime) -> None:
    publish("enrich", ENRICH)
    run, _ = runs.start_run(publish("triage", triage()), {"customer": "c-7"})
    assert wait_finished(run).status == "succeeded"
    link = ChildRun.objects.get(parent_run=run)
    child = link.child
    assert (child.status, child.workflow.slug, link.node_id, link.attempt, link.depth) == (
        "succeeded",
        "enrich",
        "call",
        1,
        1,
    )
    assert child.input == {"customer": "c-7", "seen": {"customer": "c-7"}}
    assert child.idempotency_key == f"parent:{run.pk}:call:1"
    # The child's one sink is `shape`: its output is the node's output, passed on downstream.
    assert outputs(run)["call"] == outputs(child)["shape"]
    assert outputs(run)["after"]["upstream"] == {"call": outputs(child)["shape"]}


def test_a_failing_child_fails_the_parent_node_and_a_retry_starts_a_new_child(runtime: Runtime) -> None:
    publish("charge", {"nodes": [node("pay", "core.fail", config={"message": "card declined"})]})
    flow = {"nodes": [call("call", "charge", retry={"max_attempts": 2, "backoff_seconds": 0.1})]}
    run, _ = runs.start_run(publish("checkout", flow), {"amount": 3})
    assert wait_finished(run).status == "failed"
    links = list(ChildRun.objects.filter(parent_run=run).order_by("attempt"))
    assert [link.attempt for link in links] == [1, 2]
    assert [link.child.status for link in links] == ["failed", "failed"]
    assert links[0].child.input == {"amount": 3}  # no `input`: the parent's run input
    letter = DeadLetter.objects.get(run=run)
    assert letter.node_id == "call"
    assert f"Child run {links[1].child_id} of workflow 'charge' failed" in letter.error
    assert "node 'pay' is dead after 1 attempt(s): card declined" in letter.error


def test_cancelling_the_parent_cancels_the_child_and_its_child(runtime: Runtime) -> None:
    publish("wait-forever", {"nodes": [node("w", "wait.event", config={"key": "input.k"})]})
    publish("middle", {"nodes": [call("call", "wait-forever")]})
    run, _ = runs.start_run(publish("top", {"nodes": [call("call", "middle")]}), {"k": "never"})
    middle = child_of(run)
    grandchild = child_of(middle)
    wait_for(lambda: NodeRun.objects.filter(run=grandchild, status="waiting").exists(), 30, "the event wait")
    runs.cancel_run(run.pk, reason="drill")
    for each in (run, middle, grandchild):
        each.refresh_from_db()
        assert each.status == "cancelled"
    assert not ChildRun.objects.filter(settled_at__isnull=True).exists()


def test_cancelling_a_child_alone_fails_its_parent_node(runtime: Runtime) -> None:
    publish("wait-forever", {"nodes": [node("w", "wait.event", config={"key": "input.k"})]})
    run, _ = runs.start_run(publish("top", {"nodes": [call("call", "wait-forever")]}), {"k": "never"})
    child = child_of(run)
    runs.cancel_run(child.pk, reason="not needed")
    assert wait_finished(run).status == "failed"
    assert "was cancelled" in NodeRun.objects.get(run=run, node_id="call").error


def test_kill_9_of_workers_and_the_scheduler_during_a_child_run_starts_the_child_once(
    runtime: Runtime,
) -> None:
    publish(
        "slow", {"nodes": [node("nap", "core.delay", config={"seconds": 2.0}, retry={"max_attempts": 3})]}
    )
    flow = {
        "nodes": [node("first", "core.noop"), call("call", "slow")],
        "edges": [{"source": "first", "target": "call"}],
    }
    workflow = publish("parent", flow)
    started = [runs.start_run(workflow, {"i": i})[0] for i in range(5)]
    wait_for(
        lambda: NodeRun.objects.filter(run__workflow__slug="slow", status="running").exists(), 60, "a nap"
    )
    runtime.kill("scheduler-1", signal.SIGKILL)
    runtime.kill("worker-1", signal.SIGKILL)
    runtime.kill("worker-2", signal.SIGKILL)
    runtime.worker("worker-3")
    runtime.scheduler("scheduler-2")
    for run in started:
        assert wait_finished(run, 120).status == "succeeded"
    for run in started:
        links = ChildRun.objects.filter(parent_run=run)
        assert links.count() == 1 and links.get().child.status == "succeeded"
    assert Run.objects.filter(workflow__slug="slow").count() == 5
    assert NodeRun.objects.filter(run__in=started, node_id="call", attempt=1, status="succeeded").count() == 5


def test_nesting_deeper_than_the_limit_fails_the_node_naming_the_limit(transactional_db: Any) -> None:
    publish("c", {"nodes": [node("n")]})
    publish("b", {"nodes": [call("call", "c")]})
    run, _ = runs.start_run(publish("a", {"nodes": [call("call", "b")]}), {})
    rt = Runtime(SWITCHYARD_CHILD_DEPTH_LIMIT="1")
    try:
        rt.worker("worker-1")
        rt.scheduler("scheduler-1")
        assert wait_finished(run).status == "failed"
    finally:
        rt.stop()
    b_run = ChildRun.objects.get(parent_run=run).child
    error = NodeRun.objects.get(run=b_run, node_id="call").error
    assert "workflow.run 'call': child runs would nest 2 deep; the limit is 1" in error
    assert Run.objects.filter(workflow__slug="c").count() == 0


def test_a_child_paused_or_deleted_after_publishing_fails_the_node_clearly(runtime: Runtime) -> None:
    publish("enrich", ENRICH)
    workflow = publish("triage", triage())
    Workflow.objects.filter(slug="enrich").update(paused=True)
    run, _ = runs.start_run(workflow, {"customer": "c-1"})
    assert wait_finished(run).status == "failed"
    error = NodeRun.objects.get(run=run, node_id="call").error
    assert (
        error
        == "workflow.run 'call': workflow 'enrich' is paused; resume it, then replay or retry this node."
    )
    assert not ChildRun.objects.filter(parent_run=run).exists()


# --------------------------------------------------------------------------- refused definitions


def test_publishing_a_call_cycle_is_refused_naming_the_cycle(transactional_db: Any) -> None:
    publish("a", {"nodes": [node("n")]})
    publish("b", {"nodes": [call("to_a", "a")]})
    a = Workflow.objects.get(slug="a")
    with pytest.raises(Invalid) as refused:
        versions.create_version(a, {"nodes": [call("to_b", "b")]})
    (issue,) = refused.value.issues
    assert (issue.path, issue.code, issue.node, issue.cycle) == (
        "nodes[0].config.workflow",
        "call_cycle",
        "to_b",
        ("a", "b", "a"),
    )
    assert "workflows would call each other in a cycle: a -> b -> a" in issue.message


def test_a_workflow_calling_itself_is_refused(transactional_db: Any) -> None:
    a = publish("a", {"nodes": [node("n")]})
    with pytest.raises(Invalid, match="a -> a"):
        versions.create_version(a, {"nodes": [call("again", "a")]})


@pytest.mark.parametrize(
    ("config", "path", "message"),
    [
        ({"workflow": "nobody"}, "nodes[0].config.workflow", "there is no workflow 'nobody' (node 'call')"),
        ({"workflow": "held"}, "nodes[0].config.workflow", "workflow 'held' is paused"),
        ({"workflow": "held", "version": 9}, "nodes[0].config.workflow", "workflow 'held' is paused"),
        ({"workflow": "other", "version": 9}, "nodes[0].config.version", "has no published version 9"),
    ],
)
def test_an_unknown_paused_or_missing_child_is_refused_naming_the_field(
    transactional_db: Any, config: dict[str, Any], path: str, message: str
) -> None:
    publish("held", {"nodes": [node("n")]})
    publish("other", {"nodes": [node("n")]})
    Workflow.objects.filter(slug="held").update(paused=True)
    parent = versions.create_workflow("parent", "Parent")
    with pytest.raises(Invalid) as refused:
        versions.create_version(parent, {"nodes": [node("call", "workflow.run", config=config)]})
    (issue,) = refused.value.issues
    assert issue.path == path and message in issue.message and issue.node == "call"


def test_a_named_version_runs_that_version_not_the_active_one(runtime: Runtime) -> None:
    enrich = publish("enrich", ENRICH)
    first = enrich.active_version
    publish("enrich", {"nodes": [node("other", "core.noop")]})
    flow = {"nodes": [call("call", "enrich", version=first.number)]}
    run, _ = runs.start_run(publish("pinned", flow), {"customer": "c-2"})
    assert wait_finished(run).status == "succeeded"
    child = ChildRun.objects.get(parent_run=run).child
    assert child.version_id == first.pk != Workflow.objects.get(slug="enrich").active_version_id
