"""Forks end to end: real workers and scheduler, a fake LLM provider that counts the calls it gets."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.llm_server import FakeLLMServer
from tests.integration.conftest import publish, two_workers_and_a_scheduler, wait_finished
from tests.integration.runtime import Runtime
from workflows.forks import forking
from workflows.runs import actions as runs
from workflows.store.models import LLMCall, NodeRun, Run, RunEvent, Workflow

STEPS = ("n1", "n2", "n3", "n4", "n5")


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


@pytest.fixture
def fork_runtime(transactional_db: Any, redis_clean: None, llm: FakeLLMServer) -> Iterator[Runtime]:
    yield from two_workers_and_a_scheduler(LLM_BASE_URL=llm.base_url, LLM_MODEL="fake-model")


def five_calls(prompts: dict[str, str] | None = None) -> Workflow:
    """A chain of five llm.chat nodes, each asking about its own step and the run's topic."""
    prompts = prompts or {}
    nodes = [
        {
            "id": n,
            "handler": "llm.chat",
            "config": {"prompt": prompts.get(n, f"step {n} about {{input.topic}}")},
        }
        for n in STEPS
    ]
    edges = [{"source": a, "target": b} for a, b in zip(STEPS, STEPS[1:], strict=False)]
    return publish("five", {"nodes": nodes, "edges": edges})


def asked(llm: FakeLLMServer, after: int) -> list[str]:
    """The last user message of each request the provider got after the first `after`."""
    return [r.json["messages"][-1]["content"] for r in llm.requests[after:]]


def start(workflow: Workflow, run_input: dict[str, Any]) -> Run:
    return runs.start_run(workflow, run_input)[0]


def executed(run: Run) -> set[str]:
    return set(RunEvent.objects.filter(run=run, kind="node.attempt").values_list("node_id", flat=True))


def test_a_fork_at_the_third_of_five_nodes_runs_exactly_three_and_calls_the_provider_for_none_of_the_first_two(
    fork_runtime: Runtime, llm: FakeLLMServer
) -> None:
    origin = wait_finished(start(five_calls(), {"topic": "trains"}))
    assert origin.status == "succeeded"
    assert len(llm.requests) == 5
    fork = wait_finished(forking.fork_run(origin.pk, "n3"))
    assert fork.status == "succeeded"
    assert asked(llm, 5) == ["step n3 about trains", "step n4 about trains", "step n5 about trains"]
    assert executed(fork) == {"n3", "n4", "n5"}
    assert set(LLMCall.objects.filter(run=fork).values_list("node_id", flat=True)) == {"n3", "n4", "n5"}
    rows = {n.node_id: n for n in NodeRun.objects.filter(run=fork)}
    kept = {n.node_id: n.output for n in NodeRun.objects.filter(run=origin, node_id__in=["n1", "n2"])}
    assert {n: (rows[n].status, rows[n].attempt, rows[n].output) for n in ("n1", "n2")} == {
        n: ("succeeded", 0, kept[n]) for n in ("n1", "n2")
    }
    assert all(rows[n].attempt == 1 for n in ("n3", "n4", "n5"))


def test_a_fork_onto_a_newer_version_with_edited_input_runs_the_new_prompt_with_that_input_at_the_fork_point(
    fork_runtime: Runtime, llm: FakeLLMServer
) -> None:
    origin = wait_finished(start(five_calls(), {"topic": "trains"}))
    newer = five_calls({"n4": "new step n4 about {input.topic}"})
    fork = forking.fork_run(origin.pk, "n4", newer.active_version.number, edited_input={"topic": "boats"})
    assert wait_finished(fork).status == "succeeded"
    assert asked(llm, 5) == ["new step n4 about boats", "step n5 about trains"]
    assert fork.version_id == newer.active_version_id
