"""The run page's trace tells the truth (issue 28, item 1): every node on its own row, a
person's wait drawn as waiting on the approval's row (never as queue wait on the next node),
queue waits only from queued to started, and durations that grow while the run runs."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from tests.integration.conftest import publish, wait_finished
from tests.integration.runtime import Runtime, wait_for
from workflows.runs import actions as runs
from workflows.store.models import NodeRun, Wait
from workflows.waits import approvals

APPROVAL_FLOW = {
    "nodes": [
        {"id": "draft", "handler": "core.echo"},
        {
            "id": "ok",
            "handler": "human.approval",
            "config": {"title": "Pay?", "approvers": {"groups": ["operator"]}},
        },
        {"id": "pay", "handler": "core.noop"},
    ],
    "edges": [{"source": "draft", "target": "ok"}, {"source": "ok", "target": "pay"}],
}


def epoch(value: str | None) -> float:
    assert value is not None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def bars(page: Page, node: str) -> list[dict[str, Any]]:
    """The trace's segments of a node as drawn: kind, start and end (epoch seconds)."""
    found: list[dict[str, Any]] = page.locator(f'#run-timeline rect[data-node="{node}"]').evaluate_all(
        "rects => rects.map(r => ({kind: r.dataset.segment, start: +r.dataset.start, end: +r.dataset.end}))"
    )
    return found


def test_a_decided_approval_is_drawn_as_waiting_and_every_bar_matches_the_api(
    runtime: Runtime, page_as: Any, live_url: str, users: dict[str, User], screenshot: Any
) -> None:
    workflow = publish("trace-approval", APPROVAL_FLOW)
    run, _ = runs.start_run(workflow, {"amount": 12})
    wait_for(lambda: Wait.objects.filter(run=run, closed_at__isnull=True).first(), 60, "the approval to wait")
    page: Page = page_as("operator")
    page.goto(f"{live_url}/runs/{run.pk}/")
    waiting = page.locator('#run-timeline rect[data-node="ok"][data-segment="wait"]')
    expect(waiting).to_have_count(1)
    first_end = float(waiting.get_attribute("data-end") or 0)
    # The open wait grows while the person has not decided.
    page.wait_for_function(
        f'() => +document.querySelector(\'#run-timeline rect[data-node="ok"][data-segment="wait"]\').dataset.end > {first_end + 0.5}'
    )
    expect(page.locator('#run-timeline [data-node-status="pay"]')).to_have_text(
        "pending"
    )  # a row before it runs
    screenshot(page, "approval-waiting")

    wait = Wait.objects.get(run=run)
    approvals.decide(wait.pk, users["operator"], "approve")
    assert wait_finished(run).status == "succeeded"
    page.reload()
    answer = page.request.get(f"{live_url}/api/v1/runs/{run.pk}")
    assert answer.ok
    nodes = {n["node_id"]: n for n in answer.json()["nodes"]}

    # The approval's row: one wait, from when it began to wait to the decision.
    ok = bars(page, "ok")
    assert [b["kind"] for b in ok] == ["wait"]
    assert abs(ok[0]["start"] - epoch(nodes["ok"]["started_at"])) < 0.002
    assert abs(ok[0]["end"] - epoch(nodes["ok"]["finished_at"])) < 0.002
    # The tasks' rows: queue wait exactly from queued to started, then the attempt.
    for node_id in ("draft", "pay"):
        drawn = {b["kind"]: b for b in bars(page, node_id)}
        api = nodes[node_id]
        assert set(drawn) <= {"queue", "attempt"} and "attempt" in drawn
        assert abs(drawn["attempt"]["start"] - epoch(api["started_at"])) < 0.002
        assert abs(drawn["attempt"]["end"] - epoch(api["finished_at"])) < 0.002
        if "queue" in drawn:
            assert abs(drawn["queue"]["start"] - epoch(api["queued_at"])) < 0.002
            assert abs(drawn["queue"]["end"] - epoch(api["started_at"])) < 0.002
    # The person's time is not the payment's queue wait.
    pay_queue = [b for b in bars(page, "pay") if b["kind"] == "queue"]
    assert all(b["start"] >= ok[0]["end"] - 0.002 for b in pay_queue)
    rows = page.locator("#run-timeline [data-node-label]")
    expect(rows).to_have_count(3)
    screenshot(page, "approval-decided")


def test_a_live_runs_durations_grow_on_the_page(
    runtime: Runtime, page_as: Any, live_url: str, screenshot: Any
) -> None:
    flow = {
        "nodes": [{"id": "slow", "handler": "core.delay", "config": {"seconds": 30}, "timeout_seconds": 60}],
    }
    workflow = publish("trace-live", flow)
    run, _ = runs.start_run(workflow, {})
    wait_for(lambda: NodeRun.objects.filter(run=run, status="running").exists(), 60, "the node to run")
    page: Page = page_as("viewer")
    page.goto(f"{live_url}/runs/{run.pk}/")
    header = page.locator('#run-header [data-field="run-duration"]')
    cell = page.locator('#run-nodes tr[data-node="slow"] [data-field="duration"]')
    bar = page.locator('#run-timeline rect[data-node="slow"][data-segment="attempt"]')
    expect(bar).to_have_count(1)
    seen = {
        "header": header.inner_text(),
        "cell": cell.inner_text(),
        "bar": float(bar.get_attribute("width") or 0),
    }
    # Each grows: the page's clock moves them on between the server's messages.
    page.wait_for_function(
        """([h, c, w]) => {
          const sec = (t) => t.endsWith(" ms") ? parseFloat(t) / 1000 : t.includes("min") ? 1e9 : parseFloat(t);
          const bar = document.querySelector('#run-timeline rect[data-node="slow"][data-segment="attempt"]');
          return sec(document.querySelector('#run-header [data-field="run-duration"]').textContent) > sec(h) + 1
            && sec(document.querySelector('#run-nodes tr[data-node="slow"] [data-field="duration"]').textContent) > sec(c) + 1
            && +bar.getAttribute("width") > w;
        }""",
        arg=[seen["header"], seen["cell"], seen["bar"]],
    )
    screenshot(page, "live-durations")
    runs.cancel_run(run.pk, "test over", None)
