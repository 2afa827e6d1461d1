"""Baseline: the same 4-node DAG on plain RQ 3.0 with `depends_on` and two SimpleWorkers.

    fetch_profile, enrich_location: no dependencies
    sentiment_analysis: depends_on fetch_profile
    recommendation_engine: depends_on all three

Completion is awaited on the final job (`Job.latest_result(timeout=...)`, a blocking XREAD on
its result stream). RQ keeps no durable per-node record: a job's state lives only in Redis.

RQ 3.0 moves a job whose dependencies are met to a queue-wide "ready" registry, then enqueues
it in a WATCH/MULTI transaction on that registry; when the other worker touches the registry
meanwhile (WatchError), the job is left there for the next maintenance pass (every 600 s by
default, and an idle worker only gets there when its 405 s dequeue timeout expires). With two
workers some dependents stall that way (about 5 in 100 runs here), so the workers run with
`--maintenance-interval 1 --worker-ttl 16` (maintenance at most every second, 1 s dequeue
timeout). Stalls still show as hops of up to ~1 s; `hops_over_500ms` counts them in the idle latency phase.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import harness
import rq_jobs
from harness import Batch, Member, Proc
from redis import Redis
from rq import Queue, Worker
from rq.job import Job

QUEUE = "bench-baseline"
WORKERS = 2
STALL_MS = 500.0
FETCH_CHUNK = 1000
BENCH_DIR = Path(__file__).resolve().parent


class RqBaseline:
    name = "rq-baseline"
    durable = False
    nodes_per_run = 4

    def __init__(self, redis_url: str, env: dict[str, str], logdir: Path) -> None:
        self.url = redis_url
        self.env = env
        self.logdir = logdir
        self.conn = Redis.from_url(redis_url)
        self.queue = Queue(QUEUE, connection=self.conn)
        self.procs: list[Proc] = []
        self.next_id = 0
        self.phase_jobs: list[list[Job]] = []  # every run's [fp, el, sa, re] of the current phase

    # -------------------------------------------------------------- lifecycle

    def prepare(self) -> None:
        self.conn.flushdb()

    def start(self) -> None:
        for i in range(1, WORKERS + 1):
            cmd = [
                str(harness.VENV_BIN / "rq"), "worker", "--url", self.url,
                "--worker-class", "rq.worker.SimpleWorker", "--logging_level", "WARNING",
                "--maintenance-interval", "1", "--worker-ttl", "16",
                "--path", str(BENCH_DIR), "--name", f"bench-rq-w{i}", QUEUE,
            ]  # fmt: skip
            self.procs.append(harness.spawn(cmd, f"rq-w{i}", "workers", self.env, self.logdir))
        self._wait_ready(60)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while Worker.count(connection=self.conn) < WORKERS:
            harness.check_alive(self.procs)
            if time.monotonic() > deadline:
                raise RuntimeError("the RQ workers did not register")
            time.sleep(0.1)

    def stop(self) -> None:
        harness.stop(self.procs)

    def members(self) -> list[Member]:
        found = [Member(p.name, "workers", harness.tree(p.popen.pid)) for p in self.procs]
        found.append(Member("redis", "redis", harness.tree(harness.redis_server_pid(self.conn))))
        found.append(Member("client", "client", harness.this_process()))
        return found

    # -------------------------------------------------------------- runs

    def _submit(self) -> tuple[int, Job]:
        run_id = self.next_id
        self.next_id += 1
        q = self.queue
        fp = q.enqueue(rq_jobs.fetch_profile, run_id)
        el = q.enqueue(rq_jobs.enrich_location, run_id)
        sa = q.enqueue(rq_jobs.sentiment_analysis, run_id, depends_on=fp)
        final = q.enqueue(rq_jobs.recommendation_engine, run_id, depends_on=[fp, el, sa])
        self.phase_jobs.append([fp, el, sa, final])
        return run_id, final

    @staticmethod
    def _wait(job: Job, deadline: float) -> Any:
        # Block on the result stream in short slices (redis-py's socket timeout is 5 s).
        while True:
            result = job.latest_result(timeout=2)
            if result is not None:
                return result.return_value
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job.id} did not finish")

    def one(self) -> tuple[float, list[int], list[str]]:
        t0 = time.perf_counter()
        run_id, job = self._submit()
        try:
            value = self._wait(job, time.monotonic() + 60)
        except TimeoutError as exc:
            return float("nan"), [run_id], [str(exc)]
        elapsed = time.perf_counter() - t0
        errors = [] if rq_jobs.is_final_result(run_id, value) else [f"run {run_id}: {value!r}"]
        return elapsed, [run_id], errors

    def batch(self, n: int) -> Batch:
        t0 = time.perf_counter()
        submitted = [self._submit() for _ in range(n)]
        submit_s = time.perf_counter() - t0
        deadline = time.monotonic() + max(120.0, n * 0.5)
        errors = []
        for run_id, job in submitted:
            try:
                value = self._wait(job, deadline)
            except TimeoutError as exc:
                errors.append(str(exc))
                continue
            if not rq_jobs.is_final_result(run_id, value):
                errors.append(f"run {run_id}: {value!r}")
        wall_s = time.perf_counter() - t0
        return Batch([run_id for run_id, _ in submitted], submit_s, wall_s, errors)

    # -------------------------------------------------------------- per-phase figures

    def phase_begin(self) -> None:
        self.phase_jobs = []
        harness.redis_reset_stats(self.conn)

    def phase_end(self, batch: Batch, nodes: int) -> dict[str, Any]:
        calls, top = harness.redis_command_calls(self.conn)
        out: dict[str, Any] = {"redis_cmds": calls, "redis_top": top}
        if nodes:
            out["redis_cmds_per_node"] = calls / nodes
        if self.phase_jobs:
            hops = self.hops()
            out["hop_ms"] = harness.distribution(hops)
            out["hops_over_500ms"] = sum(h > STALL_MS for h in hops)
        return out

    def hops(self) -> list[float]:
        """ms from the last dependency's end to each dependent's start, from the job hashes."""
        ids = [job.id for run in self.phase_jobs for job in run]
        fetched = []
        for start in range(0, len(ids), FETCH_CHUNK):
            fetched += Job.fetch_many(ids[start : start + FETCH_CHUNK], connection=self.conn)
        hops = []
        for start in range(0, len(fetched), 4):
            fp, el, sa, final = fetched[start : start + 4]
            for job, deps in ((sa, [fp]), (final, [fp, el, sa])):
                if job is not None and job.started_at and all(d is not None and d.ended_at for d in deps):
                    hops.append((job.started_at - max(d.ended_at for d in deps)).total_seconds() * 1000)
        return hops
