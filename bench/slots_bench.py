#!/usr/bin/env python3
"""Slots: N concurrent streaming llm.chat runs on 2 worker processes (runtime/slots.py).

    .venv/bin/python bench/slots_bench.py                          # 200 streams, 20 tokens/s, 400 tokens
    .venv/bin/python bench/slots_bench.py --streams 1000 --slots 500
    .venv/bin/python bench/slots_bench.py --probe                  # the event loop's lag, GIL shared
    .venv/bin/python bench/slots_bench.py --map 1000               # a map of 1,000 1-second HTTP items

Runs 2 RQ workers and a scheduler as `make run` does, on bench/dashboard_bench.py's embedded
servers (database recreated), against the fake provider (tests/fakes/llm_server.py) in this
process, streaming TOKENS words at RATE a second. Prints completions, wall time from the
first start to the last finish, the workers' peak RSS in total, and output tokens/s.

`--map N` runs one map node of N `http.request` items instead (runtime/items.py: items of an
I/O-bound handler on the slots), against a local server that holds each request
`--item-seconds` (tests/fakes/http_server.py), max_parallel min(N, 1000); it prints items/s,
wall time, the most requests open at once at the server and the most items sampled running
in PostgreSQL (the concurrency reached: at most 2 workers x --slots).

`--probe` measures what the docstring of runtime/slots.py quotes: how late a 10 ms sleep on
an event loop in a thread wakes, with the main thread idle and with it spinning in Python
(a CPU-bound handler), as a worker's slots share the GIL with its main thread.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from typing import Any

import harness
import psutil
from dashboard_bench import REPO, Bench

sys.path.insert(0, str(REPO))


class SlotsBench(Bench):
    """The dashboard bench's servers and database; only workers and a scheduler run."""

    def start(self) -> None:
        python = str(harness.VENV_BIN / "python")
        self.env["SWITCHYARD_WORKER_SLOTS"] = str(self.args.slots)
        self.env["SWITCHYARD_EGRESS_ALLOW"] = "127.0.0.1"  # the map's items call a local server
        for i in (1, 2):
            cmd = [python, "manage.py", "rqworker", "--name", f"slots-w{i}", "default", "agents"]
            self.procs.append(harness.spawn(cmd, f"worker-{i}", "workers", self.env, self.logdir))
        cmd = [python, "manage.py", "runscheduler", "--name", "slots-s1"]
        self.procs.append(harness.spawn(cmd, "scheduler", "scheduler", self.env, self.logdir))

    def cpu_seconds(self, group: str) -> float:
        """CPU time (user + system) of a group's processes so far."""
        times = [psutil.Process(p.popen.pid).cpu_times() for p in self.procs if p.group == group]
        return sum(t.user + t.system for t in times)

    def worker_rss(self) -> int:
        return sum(psutil.Process(p.popen.pid).memory_info().rss for p in self.procs if p.group == "workers")


def story(tokens: int) -> dict[str, Any]:
    words = " ".join(f"w{n}" for n in range(tokens))
    return {
        "model": "bench",
        "choices": [{"message": {"role": "assistant", "content": words}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": tokens},
    }


def run_streams(bench: SlotsBench, args: argparse.Namespace, base_url: str) -> dict[str, Any]:
    from workflows.store.models import LLMProvider, NodeRun, Run
    from workflows.versions import publish as versions

    LLMProvider.objects.create(name="bench", base_url=base_url, default_model="bench", is_default=True)
    config = {"prompt": "story {input.n}", "timeout_seconds": 600}
    node = {"id": "ask", "handler": "llm.chat", "config": config, "timeout_seconds": 900}
    workflow = versions.create_workflow("slots-bench", "Slots bench")
    versions.publish_version(versions.create_version(workflow, {"nodes": [node], "edges": []}))
    workflow.refresh_from_db()
    began = time.perf_counter()
    cpu_before = {g: bench.cpu_seconds(g) for g in ("workers", "scheduler")}
    own_before = sum(psutil.Process().cpu_times()[:2])
    ids = [bench.runs.start_run(workflow, {"n": n})[0].pk for n in range(args.streams)]
    peak_rss = 0
    deadline = time.monotonic() + args.tokens / args.rate * 4 + 120
    while Run.objects.filter(pk__in=ids, status__in=["succeeded", "failed"]).count() < len(ids):
        if time.monotonic() > deadline:
            raise RuntimeError("runs not finished in time; see bench/results")
        peak_rss = max(peak_rss, bench.worker_rss())
        time.sleep(0.5)
    wall = time.perf_counter() - began
    cpu = {g: round(bench.cpu_seconds(g) - before, 1) for g, before in cpu_before.items()}
    cpu["provider (this process)"] = round(sum(psutil.Process().cpu_times()[:2]) - own_before, 1)
    rows = NodeRun.objects.filter(run_id__in=ids)
    ok = rows.filter(status="succeeded")
    tokens = sum(len(o["content"].split()) for o in ok.values_list("output", flat=True))
    return {
        "streams": args.streams,
        "completions": ok.count(),
        "correct": sum(
            1 for o in ok.values_list("output", flat=True) if len(o["content"].split()) == args.tokens
        ),
        "wall_s": round(wall, 1),
        "ideal_s": round(args.tokens / args.rate, 1),
        "worker_rss_mb_peak_total": round(peak_rss / 2**20),
        "tokens_per_s": round(tokens / wall),
        "cpu_s": cpu,
    }


def run_map(bench: SlotsBench, args: argparse.Namespace, url: str) -> dict[str, Any]:
    from workflows.store.models import MapItem, Run
    from workflows.versions import publish as versions

    config = {"url": url + "/doc", "timeout_seconds": 600}
    node = {
        "id": "each",
        "handler": "http.request",
        "config": config,
        "map": "input.documents",
        "max_parallel": min(args.map, 1000),
        "timeout_seconds": 900,
    }
    workflow = versions.create_workflow("slots-map-bench", "Slots map bench")
    versions.publish_version(versions.create_version(workflow, {"nodes": [node], "edges": []}))
    workflow.refresh_from_db()
    wait_for_workers(2)
    cpu_before = {g: bench.cpu_seconds(g) for g in ("workers", "scheduler")}
    began = time.perf_counter()
    run = bench.runs.start_run(workflow, {"documents": [f"doc {i}" for i in range(args.map)]})[0]
    most_running = 0
    deadline = time.monotonic() + args.map * args.item_seconds + 120
    while Run.objects.filter(pk=run.pk, status__in=["running", "waiting"]).exists():
        if time.monotonic() > deadline:
            raise RuntimeError("the map did not finish in time; see bench/results")
        most_running = max(most_running, MapItem.objects.filter(run=run, status="running").count())
        time.sleep(0.1)
    wall = time.perf_counter() - began
    run.refresh_from_db()
    return {
        "items": args.map,
        "item_s": args.item_seconds,
        "slots_per_worker": args.slots,
        "workers": 2,
        "status": run.status,
        "wall_s": round(wall, 1),
        "items_per_s": round(args.map / wall, 1),
        "most_running_sampled": most_running,
        "ideal_items_per_s": round(min(args.map, 2 * max(args.slots, 1), 1000) / args.item_seconds, 1),
        "cpu_s": {g: round(bench.cpu_seconds(g) - before, 1) for g, before in cpu_before.items()},
    }


def wait_for_workers(count: int, timeout: float = 120) -> None:
    """Wait until `count` workers heart-beat (a map's wall time should not include their start)."""
    from workflows.runtime import bus

    deadline = time.monotonic() + timeout
    while len(bus.live_workers(30)) < count:
        if time.monotonic() > deadline:
            raise RuntimeError("the workers did not start; see bench/results")
        time.sleep(0.2)


def probe(samples: int = 200) -> dict[str, float]:
    """How late a 10 ms sleep wakes on a loop in a thread: main thread idle, then spinning."""
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()

    async def lateness() -> list[float]:
        late = []
        for _ in range(samples):
            t = time.perf_counter()
            await asyncio.sleep(0.01)
            late.append((time.perf_counter() - t - 0.01) * 1000)
        return late

    idle = asyncio.run_coroutine_threadsafe(lateness(), loop).result()
    future = asyncio.run_coroutine_threadsafe(lateness(), loop)
    while not future.done():  # a CPU-bound handler in the main thread
        sum(i * i for i in range(1000))
    busy = future.result()
    return {
        "idle_p50_ms": round(statistics.median(idle), 2),
        "idle_p95_ms": round(harness.percentile(idle, 95), 2),
        "spinning_p50_ms": round(statistics.median(busy), 2),
        "spinning_p95_ms": round(harness.percentile(busy, 95), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--slots", type=int, default=100)
    parser.add_argument("--rate", type=float, default=20.0, help="tokens a second per stream")
    parser.add_argument("--tokens", type=int, default=400)
    parser.add_argument("--probe", action="store_true")
    parser.add_argument("--map", type=int, default=0, help="items of one map node (http.request)")
    parser.add_argument("--item-seconds", type=float, default=1.0, help="how long the server holds an item")
    args = parser.parse_args()
    if args.probe:
        print(probe())
        return
    from tests.fakes.http_server import HeldHTTPServer
    from tests.fakes.llm_server import FakeLLMServer

    bench = SlotsBench(args)
    bench.prepare()
    bench.start()
    try:
        if args.map:
            with HeldHTTPServer(delay=args.item_seconds) as server:
                result = run_map(bench, args, server.url)
                print({**result, "most_open_at_server": server.most_open}, flush=True)
            return
        with FakeLLMServer(reply=story(args.tokens), chunk_delay=1 / args.rate) as fake:
            print(run_streams(bench, args, fake.base_url), flush=True)
    finally:
        harness.stop(bench.procs)


if __name__ == "__main__":
    main()
