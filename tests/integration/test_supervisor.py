"""`make run`'s supervisor (scripts/run.py) as a real process tree: restarts, state, stop.

It runs against the test servers' `switchyard` database (not the test database, which
pytest-django owns), with one worker, on a free port.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from django.conf import settings

from tests.integration.runtime import ROOT, wait_for


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def supervisor(tmp_path: Path):
    state_file = tmp_path / "supervisor.json"
    log = tmp_path / "run.log"
    env = {
        **os.environ,
        "DATABASE_URL": os.environ["DATABASE_URL"],
        "REDIS_URL": settings.REDIS_URL,
        "PORT": str(free_port()),
        "WORKERS": "1",
        "SWITCHYARD_RUN_STATE_FILE": str(state_file),
        "SWITCHYARD_RESTART_DELAY_MAX_SECONDS": "2",  # the default cap (16 s) would make this slow
    }
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "scripts" / "run.py")],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        wait_for(lambda: "is running at" in log.read_text(), timeout=90, what="the supervisor's banner")
        yield proc, state_file, log
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        # Its children run in process groups of their own (a SIGKILL of the supervisor leaves
        # them running, as a crash would): stop each, or they outlive the test session.
        for child in children(state_file).values():
            if not ours(child["pid"]):
                continue  # gone, its pid perhaps taken by another process since
            for kill in (os.killpg, os.kill):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    kill(child["pid"], signal.SIGKILL)


def ours(pid: int) -> bool:
    """Whether `pid` is still a process of this repository (its command line names it)."""
    try:
        return (
            str(ROOT).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
            or Path(f"/proc/{pid}/cwd").resolve() == ROOT
        )
    except OSError:
        return False


def children(state_file: Path) -> dict[str, dict]:
    try:
        return {c["name"]: c for c in json.loads(state_file.read_text())["children"]}
    except (OSError, ValueError):
        return {}


def test_a_crash_looping_child_is_always_restarted_and_everything_stops_promptly(supervisor) -> None:
    proc, state_file, log = supervisor
    # Kill the web process eight times in a row, each as soon as it is back: the old
    # supervisor gave up for a minute after five restarts in a minute.
    for crash in range(1, 9):
        web = wait_for(
            lambda crash=crash: (c := children(state_file).get("web"))
            and c["state"] == "running"
            and c["crashes"] == crash - 1
            and c,
            timeout=30,
            what=f"web running again before crash {crash}",
        )
        os.kill(web["pid"], signal.SIGKILL)
        restarting = wait_for(
            lambda crash=crash: (c := children(state_file).get("web")) and c["crashes"] == crash and c,
            timeout=10,
            what=f"the supervisor to see crash {crash}",
        )
        assert restarting["last_exit"] == "signal SIGKILL"
    # The backoff doubled (1, 2 s) and stays at its cap: no minute-long give-up.
    assert restarting["restart_in_seconds"] <= 2
    wait_for(
        lambda: children(state_file)["web"]["state"] == "running", timeout=20, what="web back after 8 crashes"
    )
    status = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "run.py"), "status"],
        env={**os.environ, "SWITCHYARD_RUN_STATE_FILE": str(state_file)},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "8 crashes (last: signal SIGKILL)" in status.stdout
    assert "scheduler" in status.stdout and "worker-1" in status.stdout

    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=15)
    took = time.monotonic() - started
    output = log.read_text()
    assert "did not stop in time" not in output, output[-2000:]
    assert proc.returncode == 0
    assert not state_file.exists()
    print(f"stopped in {took:.1f} s")


def test_a_rolling_restart_replaces_every_child_while_the_web_keeps_answering(supervisor) -> None:
    proc, state_file, log = supervisor
    port = int(log.read_text().split("is running at http://127.0.0.1:")[1].split("/")[0])
    before = wait_for(
        lambda: (c := children(state_file)) and all(x["state"] == "running" for x in c.values()) and c,
        timeout=30,
        what="every child running",
    )
    answers: dict[str, int] = {}
    stop = threading.Event()

    slowest = [0.0]

    def ask() -> None:  # a client that never retries: a refused connection counts against
        while not stop.is_set():
            began = time.monotonic()
            try:
                # A new Daphne's first answers are slow on a loaded machine (Django's first
                # request); a request never answered would still end in ReadTimeout.
                got = str(httpx.get(f"http://127.0.0.1:{port}/api/v1/health/live", timeout=60).status_code)
            except httpx.HTTPError as error:
                got = type(error).__name__
            answers[got] = answers.get(got, 0) + 1
            slowest[0] = max(slowest[0], time.monotonic() - began)
            time.sleep(0.02)

    client = threading.Thread(target=ask)
    client.start()
    try:
        restart = subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "run.py"), "restart"],
            env={**os.environ, "SWITCHYARD_RUN_STATE_FILE": str(state_file)},
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    finally:
        stop.set()
        client.join()
    assert restart.returncode == 0, restart.stdout + log.read_text()[-3000:]
    after = children(state_file)
    assert all(after[name]["pid"] != child["pid"] for name, child in before.items()), (before, after)
    assert all(child["crashes"] == 0 for child in after.values()), after
    # No 5xx, no refused connection and no request left without its answer while web was
    # replaced: the old process stops listening and drains (controlplane/webserver.py).
    assert set(answers) == {"200"}, answers
    print(f"answers during the restart: {answers}, slowest {slowest[0]:.1f} s")
