#!/usr/bin/env python3
"""CPU a worker or scheduler spends setting Django up, with and without Daphne's app.

    .venv/bin/python bench/process_start_bench.py            # 10 rounds
    ROUNDS=30 .venv/bin/python bench/process_start_bench.py

Each round starts two fresh interpreters, in alternating order: each sets Django up as
`manage.py <command>` would and imports the worker's and the scheduler's modules, then exits.
One names `runserver` (settings.py then installs the `daphne` app, as every process did
before), the other `rqworker` (no `daphne` app). No database or Redis is touched. Prints the
CPU (user + system) and wall time per start of each, their medians and ratio, and `uptime`.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ROUNDS = int(os.environ.get("ROUNDS", "10"))
START = """
import sys
sys.argv = ["manage.py", sys.argv[1]]
import django
django.setup()
import workflows.runtime.worker, workflows.runtime.scheduler
from django_rq.management.commands import rqworker
"""


def start(command: str) -> tuple[float, float]:
    """Run one start; return its CPU seconds and wall seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "controlplane.settings"}
    subprocess.run([sys.executable, "-c", START, command], cwd=REPO, env=env, check=True)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, wall


def main() -> None:
    figures: dict[str, list[tuple[float, float]]] = {"runserver": [], "rqworker": []}
    start("rqworker")  # warm the file cache and the bytecode
    for round_ in range(ROUNDS):
        order = ["runserver", "rqworker"] if round_ % 2 == 0 else ["rqworker", "runserver"]
        for command in order:
            figures[command].append(start(command))
    cpu = {command: statistics.median(c for c, _ in runs) for command, runs in figures.items()}
    wall = {command: statistics.median(w for _, w in runs) for command, runs in figures.items()}
    for command, label in (("runserver", "with daphne app"), ("rqworker", "without")):
        print(
            f"{label:16} CPU median {cpu[command]:.3f} s  wall median {wall[command]:.3f} s  ({ROUNDS} starts)"
        )
    print(
        f"without/with: CPU {cpu['rqworker'] / cpu['runserver']:.2f}x, wall {wall['rqworker'] / wall['runserver']:.2f}x"
    )
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
