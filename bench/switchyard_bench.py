"""Switchyard under the peers' workload: the 4-node demo DAG, 2 workers, 1 scheduler.

The client (this process) is a Django process: it starts runs with `runs.start_run` (one
transaction each), as the peers' clients do, or, in the fed phases (`batch_fed`), with
`runs.start_runs` in chunks of BULK_CHUNK (one statement each), so that the figure is the
engine's rather than one serial client's (about 2.2 ms a start took 99 % of the wall at
N=2000). It hears of finished runs on the `sy:runs` pub/sub channel, subscribed
before anything is submitted. After each phase it checks in Postgres that every run and
every node succeeded at its first attempt, and computes per-hop scheduling latency.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import harness
import psutil
import psycopg
import redis
from harness import Batch, Member, Proc

BENCH_DB = "switchyard_bench"
WORKERS = 2
SCHEDULER = "bench-s1"
# PostgreSQL backends flush their statistics at most 10 s after going idle (PGSTAT_IDLE_INTERVAL):
# pg_stat_database is read this long after a phase so that the phase's transactions are in it.
SETTLE_S = 11.0
MAX_REPORTED_ERRORS = 20
# Runs per runs.start_runs call in the fed phases: small enough that the engine has work
# after the first chunk's commit while the client writes the next, large enough that the
# client's cost per run is a small share (one statement per chunk).
BULK_CHUNK = int(os.environ.get("BULK_CHUNK") or 250)


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


class Finishes:
    """Arrival time (perf_counter) and status of every `sy:runs` message, from a thread."""

    def __init__(self, redis_url: str, channel: str) -> None:
        self.pubsub = redis.Redis.from_url(redis_url, decode_responses=True).pubsub()
        self.pubsub.subscribe(channel)
        self._confirm_subscription()
        self.seen: dict[int, tuple[float, str]] = {}
        self.duplicates = 0
        self.failure: BaseException | None = None
        self._lock = threading.Lock()
        self._waiting: set[int] = set()
        self._done = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bench-finishes", daemon=True)
        self._thread.start()

    def _confirm_subscription(self) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            message = self.pubsub.get_message(timeout=1.0)
            if message and message["type"] == "subscribe":
                return
        raise RuntimeError("no confirmation of the sy:runs subscription")

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                message = self.pubsub.get_message(ignore_subscribe_messages=True, timeout=0.5)
                if message and message["type"] == "message":
                    self._record(json.loads(message["data"]), time.perf_counter())
        except BaseException as exc:  # noqa: BLE001 - reported by wait()
            self.failure = exc
            self._done.set()

    def _record(self, payload: dict[str, Any], at: float) -> None:
        run_id = int(payload["run"])
        with self._lock:
            if run_id in self.seen:
                self.duplicates += 1
                return
            self.seen[run_id] = (at, str(payload.get("status")))
            self._waiting.discard(run_id)
            if not self._waiting:
                self._done.set()

    def wait(self, ids: list[int], timeout: float) -> list[int]:
        """Wait until every run of `ids` has finished; return those that did not in time."""
        with self._lock:
            self._waiting = {i for i in ids if i not in self.seen}
            if not self._waiting:
                return []
            self._done.clear()
        self._done.wait(timeout)
        if self.failure is not None:
            raise RuntimeError(f"the sy:runs listener failed: {self.failure!r}")
        with self._lock:
            missing, self._waiting = sorted(self._waiting), set()
        return missing

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.pubsub.close()


class SwitchyardBench:
    name = "switchyard"
    durable = True

    def __init__(self, database_url: str, redis_url: str, logdir: Path) -> None:
        self.admin_url = database_url
        self.db_url = with_database(database_url, BENCH_DB)
        self.redis_url = redis_url
        self.logdir = logdir
        self.env = {
            **os.environ,
            "DATABASE_URL": self.db_url,
            "REDIS_URL": redis_url,
            "DJANGO_SETTINGS_MODULE": "controlplane.settings",
        }
        self.redis = redis.Redis.from_url(redis_url)
        self.procs: list[Proc] = []
        self.pg: psycopg.Connection[Any] | None = None
        self.finishes: Finishes | None = None
        self.nodes_per_run = 4
        self.idle_xacts_per_s = 0.0
        self.xact0 = 0
        self.phase_t0 = 0.0

    # -------------------------------------------------------------- lifecycle

    def prepare(self) -> None:
        self._recreate_database()
        self._migrate()
        self.redis.flushall()
        self._setup_django()
        self._create_workflow()
        self.finishes = Finishes(self.redis_url, self.bus.RUNS_CHANNEL)

    def _recreate_database(self) -> None:
        self.pg = psycopg.connect(self.admin_url, autocommit=True)
        self.pg.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        self.pg.execute(f"CREATE DATABASE {BENCH_DB}")

    def _migrate(self) -> None:
        logfile = self.logdir / "migrate.log"
        with open(logfile, "wb") as out:
            cmd = [str(harness.VENV_BIN / "python"), "manage.py", "migrate", "--noinput"]
            done = subprocess.run(cmd, cwd=harness.REPO, env=self.env, stdout=out, stderr=subprocess.STDOUT)
        if done.returncode != 0:
            tail = "\n".join(logfile.read_text(errors="replace").splitlines()[-25:])
            raise RuntimeError(f"manage.py migrate failed (exit {done.returncode}):\n{tail}")

    def _setup_django(self) -> None:
        for key in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"):
            os.environ[key] = self.env[key]
        import django

        django.setup()
        from workflows.runs import actions as runs
        from workflows.runtime import bus
        from workflows.store.models import NodeRun, Run
        from workflows.versions import publish as versions

        self.bus, self.runs, self.versions = bus, runs, versions
        self.Run, self.NodeRun = Run, NodeRun

    def _create_workflow(self) -> None:
        from workflows.handlers.demo import DEMO_PROFILE
        from workflows.store.graphs import load_graph

        wf = self.versions.create_workflow("bench-demo", "Bench demo")
        self.versions.publish_version(self.versions.create_version(wf, DEMO_PROFILE))
        wf.refresh_from_db()
        self.workflow = wf
        self.graph = load_graph(wf.active_version_id)
        self.nodes_per_run = len(self.graph.nodes)

    def start(self) -> None:
        python = str(harness.VENV_BIN / "python")
        for i in range(1, WORKERS + 1):
            cmd = [python, "manage.py", "rqworker", "-v", "0", "--name", f"bench-w{i}", "default", "agents"]
            self.procs.append(harness.spawn(cmd, f"bench-w{i}", "workers", self.env, self.logdir))
        cmd = [python, "manage.py", "runscheduler", "--name", SCHEDULER]
        self.procs.append(harness.spawn(cmd, "scheduler", "scheduler", self.env, self.logdir))
        self._wait_ready(90)

    def _wait_ready(self, timeout: float) -> None:
        from rq import Worker

        deadline = time.monotonic() + timeout
        while True:
            harness.check_alive(self.procs)
            workers = Worker.count(connection=self.redis)
            if workers >= WORKERS and self.redis.exists(self.bus.scheduler_key(SCHEDULER)):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"not ready after {timeout:.0f} s ({workers} RQ workers registered)")
            time.sleep(0.1)

    def stop(self) -> None:
        try:
            harness.stop(self.procs)
        finally:
            if self.finishes is not None:
                self.finishes.close()
            if self.pg is not None:
                self.pg.close()

    def members(self) -> list[Member]:
        found = [Member(p.name, p.group, harness.tree(p.popen.pid)) for p in self.procs]
        found.append(Member("postgres", "postgres", self._postgres_finder()))
        found.append(Member("redis", "redis", harness.tree(harness.redis_server_pid(self.redis))))
        found.append(Member("client", "client", harness.this_process()))
        return found

    def _postgres_finder(self) -> harness.Finder:
        """The postmaster's tree when its data folder is readable here, else every `postgres`."""
        try:
            data = self.pg.execute("SHOW data_directory").fetchone()[0]
            pid = int(Path(data, "postmaster.pid").read_text().split()[0])
            if psutil.pid_exists(pid):
                return harness.tree(pid)
        except (OSError, ValueError, psycopg.Error):
            pass
        harness.log("postgres: postmaster not found; counting every process named postgres")
        return lambda: [p for p in psutil.process_iter(["name"]) if p.info["name"] == "postgres"]

    # -------------------------------------------------------------- runs

    def _start_run(self, user_id: str) -> int:
        run, _ = self.runs.start_run(self.workflow, {"user_id": user_id})
        return run.pk

    def one(self) -> tuple[float, list[int], list[str]]:
        t0 = time.perf_counter()
        run_id = self._start_run("u-1")
        if self.finishes.wait([run_id], 60):
            return float("nan"), [run_id], [f"run {run_id}: no finish message in 60 s"]
        at, status = self.finishes.seen[run_id]
        return at - t0, [run_id], [] if status == "succeeded" else [f"run {run_id}: {status}"]

    def batch(self, n: int) -> Batch:
        t0 = time.perf_counter()
        ids = [self._start_run(f"u-{i}") for i in range(n)]
        return self._collect(ids, t0, time.perf_counter() - t0)

    def batch_fed(self, n: int) -> Batch:
        """As `batch`, the runs started in bulk: chunks of BULK_CHUNK, each one transaction."""
        t0 = time.perf_counter()
        ids: list[int] = []
        for first in range(0, n, BULK_CHUNK):
            chunk = range(first, min(n, first + BULK_CHUNK))
            items = [self.runs.StartItem({"user_id": f"u-{i}"}) for i in chunk]
            ids += [run.pk for run, _ in self.runs.start_runs(self.workflow, items)]
        return self._collect(ids, t0, time.perf_counter() - t0)

    def _collect(self, ids: list[int], t0: float, submit_s: float) -> Batch:
        """Wait for the runs' finish messages; the batch's wall time ends at the last one."""
        n = len(ids)
        missing = self.finishes.wait(ids, max(120.0, n * 0.5))
        errors = [f"run {i}: no finish message" for i in missing]
        arrivals = {i: self.finishes.seen[i] for i in ids if i in self.finishes.seen}
        errors += [f"run {i}: {status}" for i, (_, status) in arrivals.items() if status != "succeeded"]
        last = max((at for at, _ in arrivals.values()), default=float("nan"))
        wall_s = time.perf_counter() - t0 if missing else last - t0
        return Batch(ids, submit_s, wall_s, errors)

    # -------------------------------------------------------------- per-phase figures

    def _xacts(self) -> int:
        row = self.pg.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", [BENCH_DB]
        ).fetchone()
        return int(row[0])

    def phase_begin(self) -> None:
        harness.redis_reset_stats(self.redis)
        self.xact0 = self._xacts()
        self.phase_t0 = time.perf_counter()

    def phase_end(self, batch: Batch, nodes: int) -> dict[str, Any]:
        calls, top = harness.redis_command_calls(self.redis)
        out: dict[str, Any] = {"redis_cmds": calls, "redis_top": top}
        if batch.ids:
            out["verify_errors"] = self.verify(batch.ids)
            out.update(self.timings(batch.ids))
        out["duplicate_finish_messages"] = self.finishes.duplicates  # cumulative
        time.sleep(SETTLE_S)
        xacts = self._xacts() - self.xact0
        elapsed = time.perf_counter() - self.phase_t0
        out.update(pg_xacts=xacts, pg_window_s=round(elapsed, 2), pg_xacts_per_s=xacts / elapsed)
        if nodes:
            corrected = xacts - self.idle_xacts_per_s * SETTLE_S
            out.update(redis_cmds_per_node=calls / nodes, pg_xacts_per_node=corrected / nodes)
        else:  # the idle phase: background rates, used to correct the settle window of later phases
            self.idle_xacts_per_s = xacts / elapsed
        return out

    def verify(self, ids: list[int]) -> list[str]:
        """Every run `succeeded`, every node `succeeded` at attempt 1; else one line per problem."""
        statuses = dict(self.Run.objects.filter(pk__in=ids).values_list("pk", "status"))
        errors = [f"run {i}: {statuses.get(i, 'missing')}" for i in ids if statuses.get(i) != "succeeded"]
        nodes = self.NodeRun.objects.filter(run_id__in=ids)
        expected = len(ids) * self.nodes_per_run
        if (count := nodes.count()) != expected:
            errors.append(f"{count} node rows for {len(ids)} runs, expected {expected}")
        bad = nodes.exclude(status="succeeded", attempt=1)
        for run_id, node_id, status, attempt, error in bad.values_list(
            "run_id", "node_id", "status", "attempt", "error"
        )[:MAX_REPORTED_ERRORS]:
            errors.append(f"run {run_id} node {node_id}: {status} attempt {attempt} {error[:200]}".rstrip())
        if (n_bad := bad.count()) > MAX_REPORTED_ERRORS:
            errors.append(f"... {n_bad - MAX_REPORTED_ERRORS} more bad node rows")
        return errors

    def timings(self, ids: list[int]) -> dict[str, dict[str, float | int]]:
        """Distributions (ms) over `ids`: each non-root node's start after its last predecessor's
        finish (hop), each run's first node start after the run was created (start), and the
        run's finish (its finishing transaction's start) after its last node's finish (finish)."""
        runs = dict(self.Run.objects.filter(pk__in=ids).values_list("pk", "created_at"))
        finished = dict(self.Run.objects.filter(pk__in=ids).values_list("pk", "finished_at"))
        rows = self.NodeRun.objects.filter(run_id__in=ids).values_list(
            "run_id", "node_id", "started_at", "finished_at"
        )
        per_run: dict[int, dict[str, tuple[Any, Any]]] = {}
        for run_id, node_id, started, ended in rows:
            per_run.setdefault(run_id, {})[node_id] = (started, ended)
        hops, starts, finishes = [], [], []
        for run_id, nodes in per_run.items():
            hops += self._hops(nodes)
            started = [t for t, _ in nodes.values() if t is not None]
            ended = [t for _, t in nodes.values() if t is not None]
            if started and runs.get(run_id):
                starts.append(ms(min(started) - runs[run_id]))
            if ended and finished.get(run_id):
                finishes.append(ms(finished[run_id] - max(ended)))
        return {
            "hop_ms": harness.distribution(hops),
            "start_ms": harness.distribution(starts),
            "finish_ms": harness.distribution(finishes),
        }

    def _hops(self, nodes: dict[str, tuple[Any, Any]]) -> list[float]:
        hops = []
        for node_id in self.graph.nodes:
            preds = self.graph.predecessors(node_id)
            ends = [nodes.get(p, (None, None))[1] for p in preds]
            started = nodes.get(node_id, (None, None))[0]
            if preds and started is not None and None not in ends:
                hops.append(ms(started - max(ends)))
        return hops


def ms(delta: Any) -> float:
    return delta.total_seconds() * 1000
