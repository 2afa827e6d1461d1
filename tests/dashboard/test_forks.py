"""The fork form and the comparison page (monitoring/views/forks.py), and forks marked in the runs list.

Rows are made directly (no workers): the runtime's part of a fork is in
tests/integration/test_forks.py and the browser test.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.integration.conftest import node, publish
from workflows.forks import comparison, forking
from workflows.runs import actions as runs
from workflows.store.forks import RunFork
from workflows.store.models import LLMCall, NodeRun, Run

pytestmark = pytest.mark.django_db
CHAIN = {
    "nodes": [node("a"), node("b"), node("c")],
    "edges": [{"source": "a", "target": "b"}, {"source": "b", "target": "c"}],
}


@pytest.fixture
def chain(redis_clean: None) -> Any:
    return publish("chain", CHAIN)


def finished_run(workflow: Any, outputs: dict[str, Any]) -> Run:
    run, _ = runs.start_run(workflow, {"topic": "trains"})
    for node_id, output in outputs.items():
        NodeRun.objects.filter(run=run, node_id=node_id).update(status="succeeded", attempt=1, output=output)
    Run.objects.filter(pk=run.pk).update(status="succeeded")
    run.refresh_from_db()
    return run


def finish_fork(fork: Run, outputs: dict[str, Any]) -> None:
    for node_id, output in outputs.items():
        NodeRun.objects.filter(run=fork, node_id=node_id).update(status="succeeded", attempt=1, output=output)
    Run.objects.filter(pk=fork.pk).update(status="succeeded")


THREE = {"a": {"n": 1}, "b": {"content": "the red train is late"}, "c": {"done": True}}


def test_an_operator_forks_from_the_run_page_form_and_lands_on_the_new_run(
    client_as: Any, chain: Any
) -> None:
    origin = finished_run(chain, THREE)
    operator, viewer = client_as("operator"), client_as("viewer")
    page = operator.get(f"/runs/{origin.pk}/")
    assert 'data-action="fork"' in page.content.decode()
    answer = operator.post(f"/runs/{origin.pk}/fork/", {"node": "b", "version": "", "input": ""})
    fork = RunFork.objects.get(origin=origin)
    assert answer.status_code == 302 and answer["Location"] == f"/runs/{fork.run_id}/"
    assert fork.carried == ["a"]
    shown = viewer.get(f"/runs/{fork.run_id}/").content.decode()
    assert f'data-fork-origin="{origin.pk}"' in shown
    assert f"/runs/{origin.pk}/compare/{fork.run_id}/" in shown
    back = viewer.get(f"/runs/{origin.pk}/").content.decode()
    assert f'data-fork="{fork.run_id}"' in back


def test_a_refused_fork_answers_the_form_again_with_the_status_and_the_nodes_named(
    client_as: Any, chain: Any
) -> None:
    origin, _ = runs.start_run(chain, {})
    NodeRun.objects.filter(run=origin, node_id="a").update(status="running")
    answer = client_as("operator").post(f"/runs/{origin.pk}/fork/", {"node": "c", "version": "", "input": ""})
    assert answer.status_code == 422
    html = answer.content.decode()
    assert (
        "upstream node &#x27;a&#x27; is running" in html and "upstream node &#x27;b&#x27; is pending" in html
    )
    assert 'value="c" selected' in html
    assert not RunFork.objects.exists()


@pytest.mark.parametrize(
    ("fields", "status", "said"),
    [
        ({"node": "b", "version": "", "input": "[1]"}, 422, "must be a JSON object"),
        ({"node": "b", "version": "", "input": "{nope"}, 422, "input: not JSON"),
        ({"node": "b", "version": "x1", "input": ""}, 422, "is not a version number"),
        ({"node": "zz", "version": "", "input": ""}, 404, "has no node"),
    ],
)
def test_bad_fork_fields_are_named_in_a_4xx(
    client_as: Any, chain: Any, fields: dict[str, str], status: int, said: str
) -> None:
    origin = finished_run(chain, THREE)
    answer = client_as("operator").post(f"/runs/{origin.pk}/fork/", fields)
    assert answer.status_code == status and said in answer.content.decode()


def test_a_viewer_has_no_fork_form_and_may_not_post_one(client_as: Any, chain: Any) -> None:
    origin = finished_run(chain, THREE)
    viewer = client_as("viewer")
    assert 'data-action="fork"' not in viewer.get(f"/runs/{origin.pk}/").content.decode()
    assert viewer.post(f"/runs/{origin.pk}/fork/", {"node": "b"}).status_code == 403
    assert not RunFork.objects.exists()


def test_an_operator_may_not_fork_onto_a_draft(client_as: Any, chain: Any) -> None:
    from workflows.versions import publish as versions

    origin = finished_run(chain, THREE)
    draft = versions.create_version(chain, CHAIN)
    answer = client_as("operator").post(
        f"/runs/{origin.pk}/fork/", {"node": "b", "version": str(draft.number)}
    )
    assert answer.status_code == 403 and not RunFork.objects.exists()


def test_the_runs_list_marks_forks(client_as: Any, chain: Any) -> None:
    origin = finished_run(chain, THREE)
    fork = forking.fork_run(origin.pk, "b")
    html = client_as("viewer").get("/runs/").content.decode()
    assert re.search(rf'data-run="{fork.pk}".*?data-fork-of="{origin.pk}"', html, re.S)


def test_the_comparison_names_what_changed_node_by_node_with_a_text_diff(client_as: Any, chain: Any) -> None:
    origin = finished_run(chain, THREE)
    fork = forking.fork_run(origin.pk, "b")
    finish_fork(fork, {"b": {"content": "the blue train is late"}, "c": {"done": True}})
    node_run = NodeRun.objects.get(run=fork, node_id="b")
    LLMCall.objects.create(
        node_run=node_run, run=fork, workflow=chain, node_id="b", attempt=1, provider="p", model="m",
        input_tokens=10, output_tokens=5,
    )  # fmt: skip
    cmp = comparison.compare_runs(origin.pk, fork.pk)
    verdicts = {n.node_id: n.verdict for n in cmp.nodes}
    assert verdicts == {"a": "same", "b": "changed", "c": "same"}
    b = next(n for n in cmp.nodes if n.node_id == "b")
    assert [(c.path, c.before, c.after) for c in b.output.changes] == [
        ("$.content", "the red train is late", "the blue train is late")
    ]
    assert ("delete", "red") in (b.text or []) and ("insert", "blue") in (b.text or [])
    assert b.right is not None and b.right.llm.input_tokens == 10
    assert next(n for n in cmp.nodes if n.node_id == "a").right.carried  # type: ignore[union-attr]  # a is on both sides
    assert cmp.right.attempts == 2 and cmp.right.llm.calls == 1 and cmp.left.llm.calls == 0
    viewer = client_as("viewer")
    html = viewer.get(f"/runs/{origin.pk}/compare/{fork.pk}/").content.decode()
    assert 'data-verdict="changed"' in html and "<del>red</del>" in html and "<ins>blue</ins>" in html
    only = viewer.get(f"/runs/{origin.pk}/compare/{fork.pk}/?changed=1").content.decode()
    assert re.findall(r'data-node="(\w+)"', only) == ["b"]


def test_runs_of_two_workflows_are_not_compared(client_as: Any, chain: Any) -> None:
    other = publish("other", CHAIN)
    a, b = finished_run(chain, THREE), finished_run(other, THREE)
    viewer = client_as("viewer")
    answer = viewer.get(f"/runs/{a.pk}/compare/{b.pk}/")
    assert answer.status_code == 422 and "only runs of one workflow" in answer.content.decode()
    assert viewer.get(f"/runs/{a.pk}/compare/999999/").status_code == 404


def test_the_node_panel_lists_recorded_calls_by_hash_and_says_which_were_replayed(
    client_as: Any, chain: Any
) -> None:
    from workflows.store.models import RecordedCall

    origin = finished_run(chain, THREE)
    fork = forking.fork_run(origin.pk, "b", calls="recorded")
    fields = {
        "node_id": "b",
        "attempt": 1,
        "kind": "llm",
        "step": "",
        "request": {},
        "request_hash": "c" * 64,
    }
    source = RecordedCall.objects.create(
        run=origin, node_run=NodeRun.objects.get(run=origin, node_id="b"), **fields
    )
    target = NodeRun.objects.get(run=fork, node_id="b")
    RecordedCall.objects.create(run=fork, node_run=target, outcome="replayed", replayed_from=source, **fields)
    html = client_as("viewer").get(f"/runs/{fork.pk}/nodes/b/calls/").content.decode()
    assert f'data-hash="{"c" * 64}"' in html and 'data-call-outcome="replayed"' in html
    assert f"run #{origin.pk}</a> · cost 0" in html
