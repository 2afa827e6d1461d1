"""Across hosts: workers and a scheduler in their own network namespace, the link cut mid-load.

The "far host" is a network namespace with its own address, joined to this one by a veth
pair; its processes reach PostgreSQL and Redis through TCP forwarders listening on this
side's veth address (the servers themselves listen on 127.0.0.1 only). A "near" worker and
scheduler run here. Mid-load the link goes down (`ip link set ... down`: no reset, packets
just stop, as when a cable or a switch fails) and comes back a few seconds later. Checked:
nothing lost; the far host's attempts are failed as lost after the heartbeat timeout and
retried near; when the link returns no attempt is recorded twice (the far workers' late
results are refused by the conditional finish) and the far processes carry on.

A far process cut off inside a transaction keeps that transaction's locks until PostgreSQL
ends its session (DB_IDLE_IN_TRANSACTION_SECONDS); a CI run failed here when the far
scheduler was cut off mid webhook scan and the near one waited on the scan's cursor lock with
its loop, reconciler included (the scan no longer waits for that lock).

Needs root and iproute2 (both present where `make test` runs in CI); skipped otherwise.
"""

from __future__ import annotations

import contextlib
import os
import random
import select
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from tests.integration.conftest import node, publish, wait_finished
from tests.integration.runtime import ROOT, Runtime, wait_for
from workflows.runs import actions as runs
from workflows.runtime import bus
from workflows.store.models import NodeRun, RunEvent

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None, reason="needs root and iproute2 for a network namespace"
)


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


class Forward(threading.Thread):
    """Accept on (host, port) and relay each connection to 127.0.0.1:target; while `cut`,
    close each connection it accepts at once (the port stays its own)."""

    def __init__(self, host: str, target: int, port: int = 0) -> None:
        super().__init__(daemon=True)
        self.server = socket.create_server((host, port))
        self.port = self.server.getsockname()[1]
        self.target = target
        self.stopped = False
        self.cut = False

    def run(self) -> None:
        while not self.stopped:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if self.cut:
                client.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self.pump, args=(client, upstream), daemon=True).start()

    def pump(self, a: socket.socket, b: socket.socket) -> None:
        """Relay both ways until either side closes or resets (then both are closed, as a
        link that went down would leave them)."""
        with a, b:
            while not self.stopped:
                readable, _, _ = select.select([a, b], [], [], 1.0)
                for sock in readable:
                    try:
                        data = sock.recv(65536)
                        if not data:
                            return
                        (b if sock is a else a).sendall(data)
                    except OSError:  # reset by a peer
                        return

    def stop(self) -> None:
        self.stopped = True
        self.server.close()


@pytest.fixture
def far_host() -> Iterator[dict[str, str]]:
    """A namespace with a veth link to this one; yields names and addresses."""
    tag = f"{os.getpid() % 10000}{random.randrange(100)}"
    ns, near_if, far_if = f"syfar{tag}", f"syn{tag}", f"syf{tag}"
    subnet = f"10.213.{random.randrange(1, 250)}"
    ip("netns", "add", ns)
    try:
        ip("link", "add", near_if, "type", "veth", "peer", "name", far_if)
        ip("link", "set", far_if, "netns", ns)
        ip("addr", "add", f"{subnet}.1/24", "dev", near_if)
        ip("link", "set", near_if, "up")
        ip("netns", "exec", ns, "ip", "addr", "add", f"{subnet}.2/24", "dev", far_if)
        ip("netns", "exec", ns, "ip", "link", "set", far_if, "up")
        ip("netns", "exec", ns, "ip", "link", "set", "lo", "up")
        yield {"ns": ns, "near_if": near_if, "near_ip": f"{subnet}.1", "far_ip": f"{subnet}.2"}
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            ip("link", "del", near_if)
        ip("netns", "del", ns)


def far_runtime(far: dict[str, str]) -> tuple[Runtime, list[Forward]]:
    """A Runtime whose processes run in the far namespace, reaching the stores via forwarders."""
    db = connection.settings_dict
    redis_port = int(settings.REDIS_URL.rsplit(":", 1)[1].split("/")[0])
    pg, rd = Forward(far["near_ip"], int(db["PORT"])), Forward(far["near_ip"], redis_port)
    for forward in (pg, rd):
        forward.start()
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    runtime = Runtime(
        DATABASE_URL=f"postgres://{auth}@{far['near_ip']}:{pg.port}/{db['NAME']}",
        REDIS_URL=f"redis://{far['near_ip']}:{rd.port}/{urlsplit(settings.REDIS_URL).path.lstrip('/') or 0}",  # the test's own database (one per xdist worker)
        # A far process cut off inside a transaction keeps its locks until PostgreSQL ends
        # its session (the relay keeps the connection open, as a dead link would for hours).
        # 10 s, not the default 60, within the test's wait for the far attempts to be lost.
        DB_IDLE_IN_TRANSACTION_SECONDS="10",
    )
    return runtime, [pg, rd]


def far_start(runtime: Runtime, ns: str, name: str, *command: str) -> None:
    runtime.spawn(name, ["ip", "netns", "exec", ns, sys.executable, str(ROOT / "manage.py"), *command])


def far_ready(far: Runtime) -> bool:
    for name, proc in far.procs.items():
        assert proc.poll() is None, f"{name} exited with {proc.returncode}"
    roster = set(bus.client().zrange(bus.WORKERS_ROSTER, 0, -1))
    return {"far-1", "far-2"} <= roster and bool(bus.client().exists(bus.scheduler_key("far-s")))


def test_a_cut_link_loses_nothing_and_the_far_host_carries_on(
    transactional_db, redis_clean, far_host
) -> None:
    step = {
        "handler": "core.delay",
        "config": {"seconds": 0.3},
        "retry": {"max_attempts": 3, "backoff_seconds": 0},
    }
    chain = {
        "nodes": [node("a", **step), node("b", **step), node("c", **step)],
        "edges": [{"source": "a", "target": "b"}, {"source": "b", "target": "c"}],
    }
    workflow = publish("across", chain)
    near = Runtime()
    far, forwards = far_runtime(far_host)
    queues = settings.SWITCHYARD_QUEUES
    try:
        near.worker("near-1")
        near.scheduler("near-s")
        for n in (1, 2):
            far_start(far, far_host["ns"], f"far-{n}", "rqworker", "-v", "0", "--name", f"far-{n}", *queues)
        far_start(far, far_host["ns"], "far-s", "runscheduler", "--name", "far-s")
        near.wait_ready()
        wait_for(lambda: far_ready(far), timeout=120, what="the far workers and scheduler to beat")

        started = [runs.start_run(workflow, {"i": i})[0] for i in range(30)]
        wait_for(
            lambda: NodeRun.objects.filter(status="running", worker__startswith="far-").exists(),
            timeout=60,
            what="a node running on the far host",
        )
        ip("link", "set", far_host["near_if"], "down")  # the cut
        wait_for(
            lambda: RunEvent.objects.filter(kind="node.lost", data__worker__startswith="far-").exists(),
            timeout=60,
            what="the far host's attempts failed as lost",
        )
        time.sleep(1)  # keep the link down a little longer: the near side works on meanwhile
        ip("link", "set", far_host["near_if"], "up")
        restored = timezone.now()

        for run in started:
            assert wait_finished(run, timeout=180).status == "succeeded", run.pk
        for name, proc in far.procs.items():
            assert proc.poll() is None, f"{name} exited with {proc.returncode} after the link came back"
        # The far workers carry on: runs started after the link returned run there too.
        later = [runs.start_run(workflow, {"later": i})[0] for i in range(12)]
        for run in later:
            assert wait_finished(run, timeout=120).status == "succeeded", run.pk
        assert RunEvent.objects.filter(
            kind="node.attempt", worker__startswith="far-", at__gt=restored
        ).exists(), "no far worker recorded an attempt after the link returned"
    finally:
        near.stop()
        far.stop()
        for forward in forwards:
            forward.stop()

    with connection.cursor() as cur:
        cur.execute(
            "SELECT count(*) FROM (SELECT 1 FROM workflows_runevent WHERE kind = 'node.attempt' "
            "GROUP BY run_id, node_id, attempt HAVING count(*) > 1) t"
        )
        assert cur.fetchone()[0] == 0, "an attempt was recorded twice"
        cur.execute(
            "SELECT count(*) FROM (SELECT 1 FROM workflows_runevent WHERE kind = 'node.attempt' "
            "AND data->>'status' = 'succeeded' GROUP BY run_id, node_id HAVING count(*) > 1) t"
        )
        assert cur.fetchone()[0] == 0, "a node succeeded twice"
    lost = RunEvent.objects.filter(kind="node.lost").values_list("data__worker", flat=True)
    assert lost and all(w.startswith("far-") for w in lost)
