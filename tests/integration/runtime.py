"""Real runtime processes for integration tests: RQ workers and schedulers as subprocesses.

They run `manage.py rqworker` and `manage.py runscheduler` as `make run` does, against the
test database and the test Redis. Workers and broadcasters skip Django's system checks at
their start, as the scheduler always does (tests/integration/test_system_checks.py runs them
once).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
# One folder per pytest-xdist worker: both start processes with the same names.
LOGS = ROOT / ".data" / "test" / "logs" / os.environ.get("PYTEST_XDIST_WORKER", "")


def test_database_url() -> str:
    s = connection.settings_dict
    auth = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
    return f"postgres://{auth}@{s['HOST']}:{s['PORT']}/{s['NAME']}"


def wait_for(predicate: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    """Poll `predicate` until it returns something truthy; fail with `what` at the deadline."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


class Runtime:
    """Start, kill and stop worker and scheduler processes by name."""

    def __init__(self, **env: str) -> None:
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.env = {
            **os.environ,
            "DATABASE_URL": test_database_url(),
            "REDIS_URL": settings.REDIS_URL,
            "DJANGO_SETTINGS_MODULE": "controlplane.settings",
            "SWITCHYARD_WORKER_LOST_AFTER_SECONDS": "2",
            "SWITCHYARD_RECONCILE_AFTER_SECONDS": "1",
            **env,
        }
        LOGS.mkdir(parents=True, exist_ok=True)

    def start(self, name: str, *command: str) -> subprocess.Popen[bytes]:
        """Start `manage.py <command>` as the process `name`."""
        return self.spawn(name, [sys.executable, str(ROOT / "manage.py"), *command])

    def spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        log = open(LOGS / f"{name}.log", "ab")  # noqa: SIM115 - the process keeps it
        proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs[name] = proc
        return proc

    def worker(self, name: str) -> subprocess.Popen[bytes]:
        # --skip-checks: Django's system checks took a third of a worker's start (0.6 s of CPU),
        # at every start of every test; test_system_checks.py runs them once instead.
        argv = ["rqworker", "-v", "0", "--skip-checks", "--name", name, *settings.SWITCHYARD_QUEUES]
        return self.start(name, *argv)

    def scheduler(self, name: str) -> subprocess.Popen[bytes]:
        return self.start(name, "runscheduler", "--name", name)

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Wait until every started worker and scheduler heart-beats, and RQ knows each worker
        (a worker beats before RQ registers it, and takes jobs only after: slow on a busy machine)."""
        from rq import Worker
        from rq.worker_registration import get_keys

        from workflows.runtime import bus

        def ready() -> bool:
            roster = set(bus.client().zrange(bus.WORKERS_ROSTER, 0, -1))
            registered = get_keys(connection=bus.client())
            for name, proc in self.procs.items():
                assert proc.poll() is None, f"{name} exited with {proc.returncode}; see {LOGS / name}.log"
                command = proc.args[2] if isinstance(proc.args, list) and len(proc.args) > 2 else ""
                if command == "rqworker" and (
                    name not in roster or Worker.redis_worker_namespace_prefix + name not in registered
                ):
                    return False
                if command == "runscheduler" and not bus.client().exists(bus.scheduler_key(name)):
                    return False
            return True

        wait_for(ready, timeout, "workers and schedulers to start")

    def broadcaster(self, name: str = "broadcaster") -> subprocess.Popen[bytes]:
        """The dashboard's broadcaster (monitoring/services/broadcaster.py)."""
        return self.start(name, "runbroadcaster", "--skip-checks")  # as the workers (see worker)

    def web(self, name: str, port: int) -> subprocess.Popen[bytes]:
        """Daphne serving the test database on 127.0.0.1:`port`, as `make run` starts it
        (controlplane/webserver.py: it drains at SIGTERM)."""
        server = [sys.executable, "-m", "controlplane.webserver", "-b", "127.0.0.1", "-p", str(port)]
        return self.spawn(name, [*server, "controlplane.asgi:application"])

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs.pop(name)
        os.killpg(proc.pid, sig)
        proc.wait(10)

    def stop(self) -> None:
        """End every process at once (SIGKILL to each process group), then clear from Redis
        what their clean exits would have: the worker roster, the schedulers' keys, RQ's
        worker registrations, so that nothing reads them as alive afterwards.

        Tests stop their processes when the behaviour under test is over. A SIGTERM drain took
        each worker and scheduler up to seconds (more on a loaded machine), at every test's
        teardown, and proved nothing there; the drains are tested by sending SIGTERM
        themselves (test_drain.py, test_slots.py, test_web_drain.py). What a killed process
        left in the database goes with the test's flush, like any other row.
        """
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
        for proc in self.procs.values():
            proc.wait(10)
        self.forget(self.procs)
        self.procs.clear()

    def forget(self, procs: dict[str, subprocess.Popen[bytes]]) -> None:
        """Remove the workers and schedulers named in `procs` from this runtime's Redis."""
        from rq.worker import Worker

        from workflows.runtime import bus

        commands = {name: proc.args[2] for name, proc in procs.items() if isinstance(proc.args, list)}
        workers = [name for name, command in commands.items() if command == "rqworker"]
        schedulers = [name for name, command in commands.items() if command == "runscheduler"]
        if not workers and not schedulers:
            return
        # A test that took its Redis away (an outage under test) has nothing there to clear.
        away = (redis.ConnectionError, redis.TimeoutError)
        with (
            redis.Redis.from_url(self.env["REDIS_URL"], socket_timeout=5) as client,
            contextlib.suppress(*away),
        ):
            for name in workers:
                client.delete(bus.worker_key(name))
                client.zrem(bus.WORKERS_ROSTER, name)
                if rq_worker := Worker.find_by_key(
                    Worker.redis_worker_namespace_prefix + name, connection=client
                ):
                    rq_worker.register_death()  # type: ignore[no-untyped-call]  # RQ leaves it unannotated
            for name in schedulers:
                client.delete(bus.scheduler_key(name))
