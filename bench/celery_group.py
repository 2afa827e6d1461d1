"""Celery's side of bench/map_bench.py: a `group` of N no-op tasks, run with Celery's own venv.

    MAPBENCH_BROKER=redis://127.0.0.1:6379 .data/celery-venv/bin/python bench/celery_group.py N REDIS_PID

Starts a Celery worker (prefork, 2 processes, as the peers bench runs it), sends the group,
waits for every result, and prints one JSON line: seconds, tasks/s, CPU seconds of the
worker tree, of this client and of Redis.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
from celery import Celery, group

HERE = Path(__file__).resolve().parent
BROKER = os.environ.get("MAPBENCH_BROKER", "redis://127.0.0.1:6379")  # the worker imports this too
app = Celery("mapbench", broker=f"{BROKER}/6", backend=f"{BROKER}/7")
app.conf.update(
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    result_expires=3600,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)


@app.task(name="noop")
def noop(index: int) -> dict:
    return {}


def cpu(procs: list[psutil.Process]) -> float:
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            continue
    return total


def tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def main() -> None:
    n, redis_pid = int(sys.argv[1]), int(sys.argv[2])
    celery = str(Path(sys.executable).parent / "celery")
    worker = subprocess.Popen(
        [
            celery,
            "-A",
            "celery_group",
            "worker",
            "-c",
            "2",
            "-P",
            "prefork",
            "-l",
            "WARNING",
            "-n",
            "mapbench@%h",
        ],
        cwd=HERE,
        env={**os.environ, "PYTHONPATH": str(HERE)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        for _ in range(240):
            if app.control.ping(timeout=0.5):
                break
            time.sleep(0.25)
        app.control.purge()
        workers, me, redis = tree(worker.pid), psutil.Process(), psutil.Process(redis_pid)
        before = (cpu(workers), cpu([me]), cpu([redis]))
        t0 = time.perf_counter()
        results = group(noop.s(i) for i in range(n)).apply_async().get(timeout=600)
        seconds = time.perf_counter() - t0
        after = (cpu(tree(worker.pid)), cpu([me]), cpu([redis]))
        assert len(results) == n
        print(
            json.dumps(
                {
                    "seconds": round(seconds, 2),
                    "per_second": round(n / seconds, 1),
                    "cpu_workers": round(after[0] - before[0], 2),
                    "cpu_client": round(after[1] - before[1], 2),
                    "cpu_redis": round(after[2] - before[2], 2),
                }
            )
        )
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(30)


if __name__ == "__main__":
    main()
