from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.runtime import Runtime, wait_for
from workflows.runtime import bus
from workflows.store.models import Run, Workflow
from workflows.versions import publish as versions

FINISHED = {"succeeded", "failed", "cancelled"}


@pytest.fixture
def redis_clean() -> Iterator[None]:
    bus.client().flushdb()
    bus.ensure_group()
    yield


@pytest.fixture
def runtime(transactional_db: Any, redis_clean: None) -> Iterator[Runtime]:
    """Two real RQ workers and one real scheduler, as separate processes."""
    yield from two_workers_and_a_scheduler()


def two_workers_and_a_scheduler(**env: str) -> Iterator[Runtime]:
    """Start two workers and a scheduler with `env` on top of the test's; stop them after."""
    rt = Runtime(**env)
    rt.worker("worker-1")
    rt.worker("worker-2")
    rt.scheduler("scheduler-1")
    rt.wait_ready()
    yield rt
    rt.stop()


def worker_scheduler_and_daphne(**env: str) -> Iterator[tuple[Runtime, str]]:
    """Start one worker, one scheduler and Daphne with `env`; yield them and Daphne's URL."""
    bus.client().flushdb()
    bus.ensure_group()
    port = free_port()
    rt = Runtime(**env)
    rt.worker("worker-1")
    rt.scheduler("scheduler-1")
    rt.web("daphne", port)
    rt.wait_ready()
    wait_for(lambda: accepts(port), 30, "Daphne to listen")
    yield rt, f"http://127.0.0.1:{port}"
    rt.stop()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def publish(slug: str, definition: dict[str, Any]) -> Workflow:
    """Create or update a workflow and publish the definition as its active version."""
    workflow = Workflow.objects.filter(slug=slug).first() or versions.create_workflow(slug, slug.title())
    versions.publish_version(versions.create_version(workflow, definition))
    workflow.refresh_from_db()
    return workflow


def wait_finished(run: Run, timeout: float = 60.0) -> Run:
    def finished() -> Run | None:
        run.refresh_from_db()
        return run if run.status in FINISHED else None

    return wait_for(finished, timeout, f"run {run.pk} to finish")


def node(node_id: str, handler: str = "core.noop", **fields: Any) -> dict[str, Any]:
    return {"id": node_id, "handler": handler, **fields}
