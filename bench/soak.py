"""Soak: steady load for a long time; memory over time, table sizes, latency drift.

    .venv/bin/python bench/soak.py                       # 30 minutes, 10 runs/s, retention off
    .venv/bin/python bench/soak.py --minutes 30 --retention-days 0.003   # ... pruning past ~4 min

The demo DAG (4 nodes) is started at a steady rate by this process on the same 2 workers and
1 scheduler as `make bench`. Every --sample seconds it prints each process's RSS and the
PostgreSQL tables' total size; at the end: each process's memory slope (least squares, MB
per hour, over the second half so that start-up is not counted), the tables' sizes at the
start and the end, and the run latency (start to finish) p50/p95 of the first and the last
five minutes (or fifths of the run if shorter). With --retention-days, finished runs older
than that are pruned by the scheduler as in production (workflows/operations/retention.py): compare
the table growth of two soaks, with and without (the tables' total is sampled too, and its
slope over the second half printed: near zero once pruning keeps pace). Last, every log line
of the soak's processes that says ERROR, CRITICAL or Traceback is counted per process, and
the soak exits 1 if there is one.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import harness
import psutil
import psycopg
from run import RESULTS_DIR, SERVICES_DIR, ensure_services
from switchyard_bench import SwitchyardBench

MB = 2**20
ERROR_LINE = re.compile(r"\b(ERROR|CRITICAL)\b|^Traceback")


def sizes(bench: SwitchyardBench) -> dict[str, int]:
    """The bench database's tables (bench.pg is connected to the server's admin database)."""
    with psycopg.connect(bench.db_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT relname, pg_total_relation_size(oid) FROM pg_class WHERE relkind = 'r' AND relname LIKE 'workflows%'"
        ).fetchall()
    return dict(rows)


def rss(bench: SwitchyardBench) -> dict[str, float]:
    found = {}
    for member in bench.members():
        total = 0
        for proc in member.find():
            try:
                total += proc.memory_info().rss
            except psutil.Error:
                continue
        found[member.label] = total / MB
    return found


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MB) points, in MB per hour."""
    if len(points) < 2:
        return float("nan")
    xs, ys = zip(*points, strict=True)
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return 0.0 if var == 0 else sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var * 3600


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=10.0, help="runs started per second")
    parser.add_argument("--sample", type=float, default=30.0, help="seconds between samples")
    parser.add_argument(
        "--retention-days", type=float, default=None, help="prune finished runs past this age"
    )
    args = parser.parse_args()
    if args.retention_days is not None:
        os.environ["SWITCHYARD_RETENTION_DAYS"] = str(args.retention_days)
    else:
        os.environ["SWITCHYARD_RETENTION_DAYS"] = "0"
    out = RESULTS_DIR / f"soak-{time.strftime('%Y%m%dT%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    db_url, redis_url, started_services = ensure_services()
    bench = SwitchyardBench(db_url, redis_url, out)
    bench.env["SWITCHYARD_RETENTION_DAYS"] = os.environ["SWITCHYARD_RETENTION_DAYS"]
    bench.prepare()
    bench.start()
    latencies: list[tuple[float, float]] = []  # (started at, seconds to finish)
    memory: dict[str, list[tuple[float, float]]] = {}
    tables: list[tuple[float, float]] = []  # (seconds, MB of every workflows table)
    stop = threading.Event()
    t0 = time.monotonic()
    first_sizes = sizes(bench)

    def load() -> None:
        n = 0
        while not stop.is_set():
            started = time.perf_counter()  # the clock of Finishes.seen
            run_id = bench._start_run(f"u-{n}")
            pending.append((run_id, started, time.monotonic() - t0))
            n += 1
            stop.wait(max(0.0, t0 + n / args.rate - time.monotonic()))

    pending: list[tuple[int, float, float]] = []  # run id, started (perf_counter), at (s into the soak)
    loader = threading.Thread(target=load, daemon=True)
    loader.start()
    try:
        end = t0 + args.minutes * 60
        next_sample = t0
        while time.monotonic() < end:
            now = time.monotonic()
            still = []
            for run_id, started, at in list(pending):
                seen = bench.finishes.seen.get(run_id)
                if seen is None:
                    still.append((run_id, started, at))
                else:
                    latencies.append((at, seen[0] - started))
            pending[:] = still
            if now >= next_sample:
                next_sample = now + args.sample
                mem = rss(bench)
                for name, mb in mem.items():
                    memory.setdefault(name, []).append((now - t0, mb))
                total = sum(sizes(bench).values()) / MB
                tables.append((now - t0, total))
                harness.log(
                    f"t={now - t0:5.0f} s  tables {total:7.1f} MB  "
                    + "  ".join(f"{k} {v:.0f}" for k, v in sorted(mem.items()))
                    + " MB"
                )
            time.sleep(0.5)
    finally:
        stop.set()
        loader.join(5)
        last_sizes = sizes(bench)
        bench.stop()
        if started_services:
            import services

            services.down(SERVICES_DIR)
    report(args, memory, latencies, first_sizes, last_sizes)
    print(f"\ntables, all: {tables[0][1]:.1f} MB -> {tables[-1][1]:.1f} MB, slope over the second half "
          f"{slope_per_hour([p for p in tables if p[0] >= args.minutes * 30]):+.1f} MB/h")  # fmt: skip
    errors = error_lines(out)
    print("\nerrors in logs: " + (", ".join(f"{k} {len(v)}" for k, v in errors.items()) or "none"))
    for name, lines in errors.items():
        print(f"  {name}: {lines[0]}")
    print(f"(logs in {out})")
    return 1 if errors else 0


def error_lines(logdir: Path) -> dict[str, list[str]]:
    """The lines of each process's log that report an error."""
    found: dict[str, list[str]] = {}
    for log in sorted(logdir.glob("*.log")):
        lines = [line for line in log.read_text(errors="replace").splitlines() if ERROR_LINE.search(line)]
        if lines:
            found[log.stem] = lines
    return found


def report(args: Any, memory: dict, latencies: list, first: dict, last: dict) -> None:
    span = args.minutes * 60
    window = min(300.0, span / 5)
    print(f"\n## Soak: {args.minutes:g} min at {args.rate:g} runs/s, retention "
          f"{'off' if args.retention_days is None else f'{args.retention_days:g} days'}\n")  # fmt: skip
    print("| process | RSS first MB | RSS last MB | slope MB/h (second half) |\n|---|---:|---:|---:|")
    for name, points in sorted(memory.items()):
        half = [p for p in points if p[0] >= span / 2]
        print(f"| {name} | {points[0][1]:.0f} | {points[-1][1]:.0f} | {slope_per_hour(half):+.1f} |")
    print("\n| table | start MB | end MB |\n|---|---:|---:|")
    for name in sorted(last, key=last.get, reverse=True)[:8]:
        print(f"| {name} | {first.get(name, 0) / MB:.2f} | {last[name] / MB:.2f} |")
    early = [s for at, s in latencies if at < window]
    late = [s for at, s in latencies if at >= span - window - 10]
    for label, xs in (("first", early), ("last", late)):
        if xs:
            ms = [x * 1000 for x in xs]
            print(f"\nlatency, {label} {window / 60:g} min: p50 {harness.percentile(ms, 50):.1f} ms, "
                  f"p95 {harness.percentile(ms, 95):.1f} ms ({len(ms)} runs)")  # fmt: skip


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
