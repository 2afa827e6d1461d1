"""The tests' Runtime.stop (SIGKILL) leaves nothing in Redis that reads as a live process:
the next test on this pytest-xdist worker starts with no worker or scheduler of this one's."""

from __future__ import annotations

from monitoring.services import sources
from tests.integration.runtime import Runtime
from workflows.runtime import bus


def test_stopped_workers_and_schedulers_leave_nothing_that_reads_as_alive(runtime: Runtime) -> None:
    rt = runtime
    assert sorted(name for name, _ in sources.queues_and_roster()["roster"]) == ["worker-1", "worker-2"]
    assert sorted(w["name"] for w in sources.rq_workers()) == ["worker-1", "worker-2"]
    assert [s["name"] for s in sources.schedulers()] == ["scheduler-1"]

    rt.stop()

    assert rt.procs == {}
    assert sources.queues_and_roster()["roster"] == []
    assert not bus.client().exists(bus.worker_key("worker-1"), bus.worker_key("worker-2"))
    assert sources.rq_workers() == []
    assert sources.schedulers() == []
