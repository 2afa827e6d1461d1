#!/usr/bin/env python3
"""`make bench`: Switchyard and a plain-RQ baseline on the peers' workload, side by side.

    .venv/bin/python bench/run.py                   # both, sizes 200 and 2000, one repetition
    SIZES=200 .venv/bin/python bench/run.py --only rq
    REPS=3 LAT=200 WARMUP=20 .venv/bin/python bench/run.py

Uses the embedded servers of .data/bench (started here and stopped at the end when this run
started them), or DATABASE_URL and REDIS_URL when both are set. Writes
bench/results/<UTC stamp>/results.json and the processes' logs next to it. See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path[1:1] = [str(REPO), str(REPO / "scripts")]  # sys.path[0] is bench/ already

import harness  # noqa: E402
from harness import Batch, Meter, System, log  # noqa: E402

SERVICES_DIR = REPO / ".data" / "bench"
RESULTS_DIR = BENCH / "results"
IDLE_S = 10.0
BUSY_CPUS = 0.25  # CPUs' worth of unattributed work during a phase that makes its figures suspect
PAUSE_S = 1.0
PEERS = "../shared/peers-bench/RESULTS-2026-11-22.md"  # relative to the repository (the peers run beside it)
# Headline of PEERS (median of 3 trials there); CPU per 1k nodes = "CPU s @N=2000" / 8.
PUBLISHED = {
    "celery": [122.3, 489, 127.8, 511, 11.89, 19.53, 26.34 / 8, 258],
    "rq-simple": [86.9, 347, 95.6, 382, 13.51, 18.62, 36.30 / 8, 181],
    "dramatiq": [193.4, 774, 413.7, 1655, 15.95, 27.47, 7.61 / 8, 141],
}


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name) or default)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["switchyard", "rq"], help="run one side only")
    args = parser.parse_args()
    args.sizes = [int(s) for s in os.environ.get("SIZES", "200,2000").split(",") if s.strip()]
    if not args.sizes:
        parser.error("SIZES names no batch size (SIZES=200 for a quick look)")
    args.reps = env_int("REPS", 1)
    args.lat = env_int("LAT", 200)
    args.warmup = env_int("WARMUP", 20)
    return args


# --------------------------------------------------------------------------- services


def ensure_services() -> tuple[str, str, bool]:
    """(DATABASE_URL, REDIS_URL, whether this run started the embedded servers)."""
    if os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL"):
        return os.environ["DATABASE_URL"], os.environ["REDIS_URL"], False
    import services

    was_up = services.is_up(SERVICES_DIR)
    env = services.up(SERVICES_DIR, ephemeral=False)
    log(f"services {'reused' if was_up else 'started'}: {env['DATABASE_URL']} {env['REDIS_URL']}")
    return env["DATABASE_URL"], env["REDIS_URL"], not was_up


def baseline_redis_url(redis_url: str) -> str:
    """The same server, another database number than Switchyard's."""
    parts = urlsplit(redis_url)
    db = parts.path.strip("/") or "0"
    return urlunsplit(parts._replace(path="/2" if db == "1" else "/1"))


# --------------------------------------------------------------------------- measuring


def run_phase(
    system: System, meter: Meter, name: str, runs: int, body: Callable[[], Batch], rates: bool = True
) -> dict[str, Any]:
    system.phase_begin()
    mark = meter.begin()
    batch = body()
    usage = meter.end(mark)
    nodes = runs * system.nodes_per_run
    extra = system.phase_end(batch, nodes)
    errors = batch.errors + extra.pop("verify_errors", [])
    record = {"phase": name, "runs": runs, "nodes": nodes, "wall_s": batch.wall_s, "submit_s": batch.submit_s}
    record.update(errors=len(errors), error_samples=errors[:20], **usage, **extra)
    if rates and runs and batch.wall_s > 0:
        record.update(runs_per_s=runs / batch.wall_s, nodes_per_s=nodes / batch.wall_s)
    for line in errors[:10]:
        log(f"  ERROR {system.name} {name}: {line}")
    return record


def latency_phase(system: System, meter: Meter, n: int) -> dict[str, Any]:
    latencies: list[float] = []

    def body() -> Batch:
        ids, errors, t0 = [], [], time.perf_counter()
        for _ in range(n):
            seconds, run_ids, errs = system.one()
            if seconds == seconds:  # not nan (a run that never finished is an error instead)
                latencies.append(seconds * 1000)
            ids += run_ids
            errors += errs
        return Batch(ids, 0.0, time.perf_counter() - t0, errors)

    record = run_phase(system, meter, "latency", n, body, rates=False)
    record["latency_ms"] = harness.distribution(latencies)
    log(
        f"{system.name} latency: p50 {record['latency_ms']['p50']:.2f} ms p95 {record['latency_ms']['p95']:.2f} ms"
    )
    return record


def throughput_phase(system: System, meter: Meter, n: int) -> dict[str, Any]:
    record = run_phase(system, meter, f"n{n}", n, lambda: system.batch(n))
    log(
        f"{system.name} N={n}: {record.get('runs_per_s', 0):.1f} runs/s, wall {record['wall_s']:.2f} s "
        f"(submit {record['submit_s']:.2f} s), CPU {record['cpu_s']['total']:.2f} s, errors {record['errors']}"
    )
    return record


def fed_phase(system: System, meter: Meter, n: int) -> dict[str, Any]:
    """N runs started in bulk (runs.start_runs), so that the engine, not the client, is the limit."""
    record = run_phase(system, meter, f"n{n}-fed", n, lambda: system.batch_fed(n))  # type: ignore[attr-defined]
    log(
        f"{system.name} N={n} fed in bulk: {record.get('nodes_per_s', 0):.0f} nodes/s, wall {record['wall_s']:.2f} s "
        f"(submit {record['submit_s']:.2f} s), CPU {record['cpu_s']['total']:.2f} s, errors {record['errors']}"
    )
    return record


def idle_phase(system: System, meter: Meter) -> dict[str, Any]:
    def body() -> Batch:
        time.sleep(IDLE_S)
        return Batch([], 0.0, IDLE_S, [])

    record = run_phase(system, meter, "idle", 0, body)
    record["cpu_s_per_s"] = {g: v / record["measured_s"] for g, v in record["cpu_s"]["groups"].items()}
    record["redis_cmds_per_s"] = record["redis_cmds"] / record["measured_s"]
    return record


def warm_up(system: System, n: int) -> None:
    for _ in range(3):
        _, _, errors = system.one()
        if errors:
            raise RuntimeError(f"warm-up run failed: {errors}")
    batch = system.batch(n)
    if batch.errors:
        raise RuntimeError(f"warm-up batch failed: {batch.errors[:5]}")


def measure(system: System, args: argparse.Namespace) -> dict[str, Any]:
    """Prepare, start, warm up, then idle + (latency, N...) x REPS; always stop the processes."""
    out: dict[str, Any] = {"reps": [], "durable_node_record": system.durable}
    meter = None
    try:
        system.prepare()
        system.start()
        meter = Meter(system.members())
        warm_up(system, args.warmup)
        out["idle"] = idle_phase(system, meter)
        for rep in range(args.reps):
            log(f"{system.name}: repetition {rep + 1}/{args.reps}")
            phases = {"latency": latency_phase(system, meter, args.lat)}
            for n in args.sizes:
                time.sleep(PAUSE_S)
                phases[f"n{n}"] = throughput_phase(system, meter, n)
                if hasattr(system, "batch_fed"):  # the systems that can be fed in bulk
                    time.sleep(PAUSE_S)
                    phases[f"n{n}-fed"] = fed_phase(system, meter, n)
            out["reps"].append(phases)
    except Exception as exc:  # the other side and the report still run
        out["error"] = f"{type(exc).__name__}: {exc}"
        out["traceback"] = traceback.format_exc()
        log(f"{system.name} FAILED: {out['traceback']}")
    finally:
        if meter is not None:
            meter.close()
        system.stop()
    return out


# --------------------------------------------------------------------------- summary


def dig(record: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(record, dict) or key not in record:
            return None
        record = record[key]
    return record


def summarize(result: dict[str, Any], sizes: list[int]) -> dict[str, Any]:
    reps = result["reps"]

    def med(phase: str, *path: str) -> float | None:
        return harness.median(dig(rep.get(phase), *path) for rep in reps)

    big = f"n{max(sizes)}"
    s: dict[str, Any] = {"errors": sum(p["errors"] for rep in reps for p in rep.values())}
    for n in sizes:
        s[f"n{n}_runs_per_s"] = med(f"n{n}", "runs_per_s")
        s[f"n{n}_nodes_per_s"] = med(f"n{n}", "nodes_per_s")
        s[f"n{n}_fed_nodes_per_s"] = med(f"n{n}-fed", "nodes_per_s")
        s[f"n{n}_fed_submit_s"] = med(f"n{n}-fed", "submit_s")
    for q in ("p50", "p95", "p99"):
        s[f"idle_{q}_ms"] = med("latency", "latency_ms", q)
        s[f"hop_{q}_ms"] = med(big, "hop_ms", q)
        s[f"idle_hop_{q}_ms"] = med("latency", "hop_ms", q)
    s["idle_start_p50_ms"] = med("latency", "start_ms", "p50")
    s["idle_finish_p50_ms"] = med("latency", "finish_ms", "p50")
    s["idle_hops_over_500ms"] = med("latency", "hops_over_500ms")
    nodes = med(big, "nodes") or max(sizes) * 4
    members = dig(reps[0] if reps else None, big, "members") or {}
    groups = sorted({g for g in members.values() if list(members.values()).count(g) > 1})
    s["cpu_s_per_1k_nodes"] = _per_1k(med(big, "cpu_s", "total"), nodes)
    s["fed_cpu_s_per_1k_nodes"] = _per_1k(med(f"{big}-fed", "cpu_s", "total"), nodes)
    s["fed_hop_p50_ms"] = med(f"{big}-fed", "hop_ms", "p50")
    by = {k: med(big, "cpu_s", "labels", k) for k in members}
    by |= {f"group:{g}": med(big, "cpu_s", "groups", g) for g in groups}
    s["cpu_s_per_1k_nodes_by"] = {k: _per_1k(v, nodes) for k, v in by.items()}
    s["peak_rss_mb_sum"] = med(big, "peak_mb", "rss", "total")
    s["peak_pss_mb_sum"] = med(big, "peak_mb", "pss", "total")
    keys = [*members, *(f"group:{g}" for g in groups)]
    s["peak_rss_mb_by"] = {k: med(big, "peak_mb", "rss", k) for k in keys}
    for phase in ("latency", big):
        s[f"redis_cmds_per_node_{phase}"] = med(phase, "redis_cmds_per_node")
        s[f"pg_xacts_per_node_{phase}"] = med(phase, "pg_xacts_per_node")
    others = [p["other_cpu_s"] / p["measured_s"] for rep in reps for p in rep.values()]
    s["other_cpus_max"] = max(others, default=None)
    s["idle_redis_cmds_per_s"] = dig(result, "idle", "redis_cmds_per_s")
    s["idle_pg_xacts_per_s"] = dig(result, "idle", "pg_xacts_per_s")
    s["idle_cpu_s_per_s"] = dig(result, "idle", "cpu_s_per_s")
    return s


def _per_1k(seconds: float | None, nodes: float) -> float | None:
    return None if seconds is None else seconds / nodes * 1000


# --------------------------------------------------------------------------- printing


def fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and value != value:
        return "nan"
    return f"{value:,.{digits}f}"


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|---" + "|---:" * (len(header) - 1) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def main_columns(sizes: list[int]) -> list[tuple[str, str, int]]:
    big = max(sizes)
    cols = []
    for n in sizes:
        cols += [(f"N={n} runs/s", f"n{n}_runs_per_s", 1), (f"N={n} nodes/s", f"n{n}_nodes_per_s", 0)]
    cols += [("idle p50 ms", "idle_p50_ms", 2), ("idle p95 ms", "idle_p95_ms", 2)]
    cols += [(f"CPU s per 1k nodes @N={big}", "cpu_s_per_1k_nodes", 2)]
    cols += [(f"peak RSS MB (sum) @N={big}", "peak_rss_mb_sum", 0)]
    return cols


def print_main(summaries: dict[str, dict[str, Any]], sizes: list[int]) -> None:
    cols = main_columns(sizes)
    rows = [[name] + [fmt(s.get(key), d) for _, key, d in cols] for name, s in summaries.items()]
    sy, rq = summaries.get("switchyard"), summaries.get("rq-baseline")
    if sy and rq:
        ratios = [_ratio(sy.get(key), rq.get(key)) for _, key, _ in cols]
        rows.append(
            ["switchyard / rq-baseline"] + [fmt(r, 2) + "×" if r is not None else "–" for r in ratios]
        )
    print(table(["system"] + [c for c, _, _ in cols], rows))


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def print_details(summaries: dict[str, dict[str, Any]], sizes: list[int]) -> None:
    big = f"n{max(sizes)}"
    names = list(summaries)
    figures: list[tuple[str, Callable[[dict[str, Any]], Any], int]] = [
        *(
            (
                f"N={n} nodes/s, fed in bulk (runs.start_runs)",
                lambda s, n=n: s.get(f"n{n}_fed_nodes_per_s"),
                0,
            )
            for n in sizes
        ),
        *((f"N={n} fed: client submit s", lambda s, n=n: s.get(f"n{n}_fed_submit_s"), 2) for n in sizes),
        (f"CPU s per 1k nodes @N={max(sizes)}, fed in bulk", lambda s: s.get("fed_cpu_s_per_1k_nodes"), 2),
        (f"hop latency p50 ms @N={max(sizes)}, fed in bulk", lambda s: s.get("fed_hop_p50_ms"), 2),
        (f"hop latency p50 ms @N={max(sizes)}", lambda s: s.get("hop_p50_ms"), 2),
        (f"hop latency p95 ms @N={max(sizes)}", lambda s: s.get("hop_p95_ms"), 2),
        (f"hop latency p99 ms @N={max(sizes)}", lambda s: s.get("hop_p99_ms"), 2),
        ("idle p99 ms", lambda s: s.get("idle_p99_ms"), 2),
        ("idle hop p50 ms", lambda s: s.get("idle_hop_p50_ms"), 2),
        ("idle hop p95 ms", lambda s: s.get("idle_hop_p95_ms"), 2),
        ("idle: run created → first node start, p50 ms", lambda s: s.get("idle_start_p50_ms"), 2),
        ("idle: last node finish → run finished, p50 ms", lambda s: s.get("idle_finish_p50_ms"), 2),
        (
            "idle: dependents stalled > 500 ms (RQ 3.0 ready registry)",
            lambda s: s.get("idle_hops_over_500ms"),
            0,
        ),
        (f"Redis cmds/node @N={max(sizes)}", lambda s: s.get(f"redis_cmds_per_node_{big}"), 1),
        ("Redis cmds/node, latency phase", lambda s: s.get("redis_cmds_per_node_latency"), 1),
        (f"PG transactions/node @N={max(sizes)}", lambda s: s.get(f"pg_xacts_per_node_{big}"), 2),
        ("PG transactions/node, latency phase", lambda s: s.get("pg_xacts_per_node_latency"), 2),
        ("idle: Redis cmds/s", lambda s: s.get("idle_redis_cmds_per_s"), 1),
        ("idle: PG transactions/s", lambda s: s.get("idle_pg_xacts_per_s"), 1),
        (f"peak PSS MB (sum) @N={max(sizes)}", lambda s: s.get("peak_pss_mb_sum"), 0),
        (
            "CPU not attributed to measured processes, max over phases (CPUs)",
            lambda s: s.get("other_cpus_max"),
            2,
        ),
    ]
    labels = sorted({k for s in summaries.values() for k in s.get("peak_rss_mb_by", {})}, key=_label_order)
    for k in labels:
        figures.append(
            (f"peak RSS MB {_label_name(k)}", lambda s, k=k: s.get("peak_rss_mb_by", {}).get(k), 0)
        )
    cpu_keys = sorted(
        {k for s in summaries.values() for k in s.get("cpu_s_per_1k_nodes_by", {})}, key=_label_order
    )
    for k in cpu_keys:
        figures.append(
            (f"CPU s/1k nodes {_label_name(k)}", lambda s, k=k: s.get("cpu_s_per_1k_nodes_by", {}).get(k), 3)
        )
    rows = [[label] + [fmt(get(summaries[n]), d) for n in names] for label, get, d in figures]
    print(table(["figure"] + names, rows))


def _label_name(key: str) -> str:
    if key == "total":
        return "[all processes]"
    return f"[{key.removeprefix('group:')} total]" if key.startswith("group:") else key


def _label_order(key: str) -> tuple[int, str]:
    return (1 if key.startswith("group:") else 2 if key == "total" else 0, key)


def print_published() -> None:
    header = ["system (published 2026-11-22, not measured in this run)"] + [
        c for c, _, _ in main_columns([200, 2000])
    ]
    digits = [1, 0, 1, 0, 2, 2, 2, 0]
    rows = [
        [name] + [fmt(v, d) for v, d in zip(vals, digits, strict=True)] for name, vals in PUBLISHED.items()
    ]
    print(table(header, rows))
    print(f"(source: {PEERS}; RQ 2.12 and Redis 7 without persistence there.)")


def report(results: dict[str, Any], sizes: list[int]) -> None:
    summaries = {name: r["summary"] for name, r in results["systems"].items() if r.get("summary")}
    print(
        f"\n## Switchyard vs plain RQ ({results['meta']['stamp']}, sizes {sizes}, REPS={results['meta']['reps']})\n"
    )
    if summaries:
        print_main(summaries, sizes)
        print(
            "\nworkflow run = 4 node executions; REPS>1: medians. rq-baseline keeps no durable per-node record "
            "(job state lives only in Redis); switchyard stores every node attempt in PostgreSQL.\n"
        )
        print_details(summaries, sizes)
        print(
            "\nhop: successor start - max(predecessor finish); switchyard from PostgreSQL (NodeRun), "
            "rq-baseline from the job hashes in Redis (started_at/ended_at); at N>1 it includes queueing. "
            "fed in bulk: the same runs started by runs.start_runs in chunks (switchyard_bench.BULK_CHUNK), "
            "so that the engine is the limit, not one client's serial starts. "
            "PG transactions/node counts autocommit statements too (xact_commit delta, idle background "
            "of the 11 s stats-settle window subtracted). Postgres RSS counts shared buffers once per "
            "backend (see PSS).\n"
        )
    print_published()
    for name, s in summaries.items():
        if (s.get("other_cpus_max") or 0) > BUSY_CPUS:
            print(
                f"\n**The machine was busy during {name}**: other processes and kernel threads used up "
                f"to {s['other_cpus_max']:.2f} CPUs in a phase (of {os.cpu_count()}); rerun before quoting."
            )
    for name, r in results["systems"].items():
        if r.get("error"):
            print(f"\n**{name} FAILED**: {r['error']}")
        errors = r.get("summary", {}).get("errors")
        if errors:
            print(f"\n**{name}: {errors} errors** (see results.json error_samples)")
    print(f"\nresults: {results['meta']['out']}/results.json")


# --------------------------------------------------------------------------- main


def environment(
    args: argparse.Namespace, out: Path, db_url: str, redis_url: str, started: bool
) -> dict[str, Any]:
    import psutil
    import redis
    import rq

    return {
        "stamp": out.name, "out": str(out), "sizes": args.sizes, "reps": args.reps, "lat": args.lat,
        "warmup": args.warmup, "nproc": os.cpu_count(), "cpu": platform.processor() or platform.machine(),
        "mem_gib": round(psutil.virtual_memory().total / 2**30, 1), "python": platform.python_version(),
        "rq": rq.__version__, "redis_py": redis.__version__, "database_url": db_url, "redis_url": redis_url,
        "started_services": started,
    }  # fmt: skip


def run_all(args: argparse.Namespace, out: Path, db_url: str, redis_url: str) -> dict[str, dict[str, Any]]:
    systems: dict[str, dict[str, Any]] = {}
    if args.only in (None, "rq"):
        import rq_baseline

        env = dict(os.environ)
        rq_url = baseline_redis_url(redis_url)
        systems["rq-baseline"] = measure(rq_baseline.RqBaseline(rq_url, env, out), args)
    if args.only in (None, "switchyard"):
        import switchyard_bench

        systems["switchyard"] = measure(switchyard_bench.SwitchyardBench(db_url, redis_url, out), args)
    for result in systems.values():
        if result["reps"]:
            result["summary"] = summarize(result, args.sizes)
    return systems


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally blocks
    out = RESULTS_DIR / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out.mkdir(parents=True, exist_ok=True)
    db_url, redis_url, started = ensure_services()
    results: dict[str, Any] = {"meta": environment(args, out, db_url, redis_url, started), "systems": {}}
    try:
        results["systems"] = run_all(args, out, db_url, redis_url)
        results["published_peers"] = {"source": PEERS, "columns": [c for c, _, _ in main_columns([200, 2000])],
                                      "rows": PUBLISHED}  # fmt: skip
        (out / "results.json").write_text(json.dumps(results, indent=1, default=str))
        report(results, args.sizes)
    finally:
        if started:
            import services

            log("stopping the embedded services")
            services.down(SERVICES_DIR)
    ok = all(not r.get("error") and not dig(r, "summary", "errors") for r in results["systems"].values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
