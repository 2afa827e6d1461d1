"""A fleet of attempts on a worker's slots (issue 23), real processes: the worker takes the
jobs of I/O-bound nodes several at a time, and the statements of its slots share a few
connections, so one statement waiting on PostgreSQL does not hold up the other slots."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction

from tests.fakes.llm_server import FakeLLMServer
from tests.integration.conftest import publish
from tests.integration.runtime import Runtime, wait_for
from tests.integration.test_agent import agent_flow
from tests.integration.test_slots import all_finished, chat, errors, start, start_runs
from workflows.runs import actions as runs
from workflows.runtime.worker import TAKE_AT_MOST
from workflows.store.models import LLMProvider, NodeRun, Run

OTHERS = 5


@pytest.fixture
def fake() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(gated=True) as server:
        yield server


@pytest.fixture
def rt(transactional_db: Any, redis_clean: None, fake: FakeLLMServer) -> Iterator[Runtime]:
    LLMProvider.objects.create(name="fakeco", base_url=fake.base_url, default_model="m", is_default=True)
    runtime = Runtime(SWITCHYARD_WORKER_SLOTS="20")
    yield runtime
    fake.go.set()
    runtime.stop()


def test_a_slot_whose_statement_waits_on_a_lock_holds_up_none_of_the_other_slots(
    rt: Runtime, fake: FakeLLMServer
) -> None:
    start(rt, "w1")
    blocked, *others = start_runs(chat("locked"), 1 + OTHERS)
    wait_for(lambda: fake.held >= 1 + OTHERS, 60, "every call held in flight at the provider")

    with transaction.atomic():
        # The blocked run's call record (a foreign key to its node row) now waits on this lock.
        NodeRun.objects.select_for_update().get(run=blocked)
        fake.go.set()
        # With one connection for all the slots (before), every other statement queued behind it.
        finished = all_finished(others, timeout=60)
        assert {r.status for r in finished} == {"succeeded"}, errors(finished)
        assert Run.objects.get(pk=blocked.pk).status == "running"

    assert [r.status for r in all_finished([blocked])] == ["succeeded"], errors([blocked])


def test_a_worker_with_free_slots_claims_queued_agents_several_at_a_time(
    rt: Runtime, fake: FakeLLMServer
) -> None:
    rt.scheduler("s1")
    agent = publish("fleet", agent_flow([]))
    count = TAKE_AT_MOST + 4
    started = [runs.start_run(agent, {"who": f"u{n}"})[0] for n in range(count)]
    queued = NodeRun.objects.filter(run__in=started, node_id="agent", status="queued")
    wait_for(lambda: queued.count() == count, 60, "the agents queued by the scheduler")

    rt.worker("w1")
    wait_for(lambda: fake.held >= count, 60, "every agent's first turn held at the provider")

    # One claim statement per take: its rows share the statement's start (now()); one job a
    # pop (before) claimed each in a statement of its own.
    running = NodeRun.objects.filter(run__in=started, node_id="agent", status="running", worker="w1")
    claims = set(running.values_list("started_at", flat=True))
    assert running.count() == count and len(claims) <= 2, len(claims)
    fake.go.set()
    assert {r.status for r in all_finished(started)} == {"succeeded"}, errors(started)
