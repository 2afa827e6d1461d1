"""Process start/stop, CPU and memory accounting, percentiles: what both benchmarks share.

CPU of a process is user + system time of the process and of its reaped children (PostgreSQL
backends that exit are reaped by the postmaster, so their time stays in the group). A phase's
figure is the delta between two readings. Memory is sampled in a thread: RSS every 50 ms
(/proc/PID/statm), PSS every second (/proc/PID/smaps_rollup, which is costly); each phase keeps
the peak per process label, per group and of the sum over everything measured. The sampler
thread's own CPU is not billed to the client; it is reported (`sampler_cpu_s`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import psutil

# The benches' fake LLM providers and HTTP targets listen on 127.0.0.1, which the egress
# policy refuses (docs/admins/egress.md): allow that address, for the processes started too.
os.environ.setdefault("SWITCHYARD_EGRESS_ALLOW", "127.0.0.1")

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = REPO / ".venv" / "bin"
SAMPLE_SECONDS = 0.05
REFRESH_EVERY = 10  # samples between re-discoveries of the process trees
PSS_EVERY = 20  # samples between PSS readings (smaps_rollup is costly on PostgreSQL's shared memory)
PAGE = os.sysconf("SC_PAGE_SIZE")
MB = 2**20


def log(message: str) -> None:
    print(time.strftime("%H:%M:%S"), message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- processes


@dataclass(frozen=True)
class Proc:
    name: str
    group: str
    popen: subprocess.Popen[bytes]


def spawn(cmd: list[str], name: str, group: str, env: dict[str, str], logdir: Path) -> Proc:
    """Start a command in its own session (so that its whole tree can be signalled)."""
    with open(logdir / f"{name}.log", "ab") as logfile:
        popen = subprocess.Popen(
            cmd, cwd=REPO, env=env, stdout=logfile, stderr=subprocess.STDOUT, start_new_session=True
        )
    log(f"started {name} (pid {popen.pid}): {' '.join(cmd[-4:])}")
    return Proc(name, group, popen)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_listening(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listened on port {port} within {timeout:.0f} s")


def results_dir(name: str) -> Path:
    """A new bench/results/<UTC stamp>-<name> folder."""
    out = REPO / "bench" / "results" / f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}-{name}"
    out.mkdir(parents=True, exist_ok=True)
    return out


@contextlib.contextmanager
def serving(out: Path) -> Iterator[str]:
    """Daphne serving the app (this process's environment) on a free port, its log in `out`;
    yield its base URL, and stop it after."""
    port = free_port()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "controlplane.settings"}
    cmd = [str(VENV_BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "controlplane.asgi:application"]
    web = spawn(cmd, "daphne", "web", env, out)
    try:
        wait_listening(port)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop([web])


def _signal_group(proc: Proc, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.popen.pid, sig)


def stop(procs: Iterable[Proc], grace: float = 15.0) -> None:
    """SIGTERM each process group, wait up to `grace` seconds, then SIGKILL what is left."""
    procs = list(procs)
    for proc in procs:
        if proc.popen.poll() is None:
            _signal_group(proc, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in procs:
        try:
            proc.popen.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log(f"{proc.name} ignored SIGTERM for {grace:.0f} s; killing it")
    for proc in procs:
        _signal_group(proc, signal.SIGKILL)  # stragglers of the group, if any
        try:
            proc.popen.wait(5)
        except subprocess.TimeoutExpired:
            log(f"{proc.name} (pid {proc.popen.pid}) did not exit after SIGKILL")


def check_alive(procs: Iterable[Proc]) -> None:
    dead = [f"{p.name} (exit {p.popen.returncode})" for p in procs if p.popen.poll() is not None]
    if dead:
        raise RuntimeError(f"process(es) died: {', '.join(dead)}; see their logs")


# --------------------------------------------------------------------------- accounting

Finder = Callable[[], list[psutil.Process]]


@dataclass(frozen=True)
class Member:
    """One measured thing: a label (printed), its group (CPU/memory totals), how to find it."""

    label: str
    group: str
    find: Finder


def tree(pid: int | None) -> Finder:
    def find() -> list[psutil.Process]:
        if pid is None:
            return []
        try:
            root = psutil.Process(pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    return find


def this_process() -> Finder:
    me = psutil.Process()
    return lambda: [me]


def _cpu_seconds(proc: psutil.Process) -> float:
    try:
        t = proc.cpu_times()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return 0.0
    return t.user + t.system + t.children_user + t.children_system


def _rss(pid: int) -> int:
    """Resident set size in bytes (/proc/PID/statm: cheap); 0 when the process is gone."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _pss(pid: int) -> int:
    """Proportional set size in bytes (/proc/PID/smaps_rollup: walks the page tables)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@dataclass(frozen=True)
class Mark:
    cpu: dict[str, float]
    t0: float
    machine_busy: float
    sampler: float


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine spent not idle (all CPUs), since boot."""
    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0)


class Meter:
    """CPU deltas and peak memory over phases, for a fixed set of members."""

    def __init__(self, members: list[Member]) -> None:
        self.members = members
        self._lock = threading.Lock()
        self._peak: dict[str, dict[str, float]] | None = None
        self._sampler_cpu = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bench-sampler", daemon=True)
        self._thread.start()

    def cpu(self) -> dict[str, float]:
        """Cumulative CPU seconds per label (client minus the sampler thread)."""
        out = {m.label: sum(_cpu_seconds(p) for p in m.find()) for m in self.members}
        with self._lock:
            for m in self.members:
                if m.group == "client":
                    out[m.label] -= self._sampler_cpu
        return out

    def _sample(self, pids: dict[str, list[int]], with_pss: bool) -> dict[str, tuple[int, int | None]]:
        return {
            label: (sum(map(_rss, found)), sum(map(_pss, found)) if with_pss else None)
            for label, found in pids.items()
        }

    def _record(self, sample: dict[str, tuple[int, int | None]]) -> None:
        """Fold one sample into the peaks: per label, per group, and of the sum of all."""
        if self._peak is None:
            return
        for kind, index in (("rss", 0), ("pss", 1)):
            if sample and next(iter(sample.values()))[index] is None:
                continue
            sums: dict[str, int] = {}
            for m in self.members:
                value = sample[m.label][index] or 0
                for key in (m.label, f"group:{m.group}", "total"):
                    sums[key] = sums.get(key, 0) + value
            peak = self._peak[kind]
            for key, value in sums.items():
                peak[key] = max(peak.get(key, 0), value)

    def _loop(self) -> None:
        start = time.thread_time()
        pids: dict[str, list[int]] = {}
        for n in itertools.count():
            if self._stop.is_set():
                return
            if n % REFRESH_EVERY == 0:  # process trees change rarely (PostgreSQL backends)
                pids = {m.label: [p.pid for p in m.find()] for m in self.members}
            sample = self._sample(pids, with_pss=n % PSS_EVERY == 0)
            with self._lock:
                self._sampler_cpu = time.thread_time() - start
                self._record(sample)
            self._stop.wait(SAMPLE_SECONDS)

    def begin(self) -> Mark:
        with self._lock:
            self._peak = {"rss": {}, "pss": {}}
        time.sleep(SAMPLE_SECONDS * 1.5)  # at least one sample inside the phase
        with self._lock:
            sampler = self._sampler_cpu
        return Mark(self.cpu(), time.perf_counter(), machine_busy_seconds(), sampler)

    def end(self, mark: Mark) -> dict[str, Any]:
        cpu1 = self.cpu()
        busy = machine_busy_seconds() - mark.machine_busy
        elapsed = time.perf_counter() - mark.t0
        time.sleep(SAMPLE_SECONDS * 1.5)
        with self._lock:
            peak, self._peak = self._peak or {"rss": {}, "pss": {}}, None
        # max(0, ...): the client's figure minus the sampler's can dip a hair below zero when idle
        by_label = {k: round(max(0.0, cpu1[k] - mark.cpu.get(k, 0.0)), 3) for k in cpu1}
        by_group: dict[str, float] = {}
        for m in self.members:
            by_group[m.group] = round(by_group.get(m.group, 0.0) + by_label[m.label], 3)
        with self._lock:
            sampler = self._sampler_cpu - mark.sampler
        measured = sum(by_label.values())
        return {
            "measured_s": elapsed,
            "members": {m.label: m.group for m in self.members},
            "sampler_cpu_s": round(sampler, 3),  # not billed to anyone
            # CPU the machine spent on anything but the measured processes (other work, kernel)
            "other_cpu_s": round(busy - measured - sampler, 3),
            "cpu_s": {"total": round(sum(by_label.values()), 3), "groups": by_group, "labels": by_label},
            "peak_mb": {kind: {k: round(v / MB, 1) for k, v in d.items()} for kind, d in peak.items()},
        }

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)


# --------------------------------------------------------------------------- statistics


def percentile(xs: list[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default, as the peers use)."""
    s = sorted(xs)
    if not s:
        return float("nan")
    k = (len(s) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def distribution(xs: list[float]) -> dict[str, float | int]:
    if not xs:
        return {"n": 0}
    return {
        "n": len(xs),
        "p50": round(percentile(xs, 50), 3),
        "p95": round(percentile(xs, 95), 3),
        "p99": round(percentile(xs, 99), 3),
        "min": round(min(xs), 3),
        "max": round(max(xs), 3),
    }


def median(xs: Iterable[float | None]) -> float | None:
    values = [x for x in xs if x is not None]
    return statistics.median(values) if values else None


# --------------------------------------------------------------------------- shared shapes


@dataclass
class Batch:
    """What one submission of runs produced: ids, timings (seconds), and errors seen."""

    ids: list[int]
    submit_s: float
    wall_s: float
    errors: list[str]


class System(Protocol):
    """What run.py drives: rq_baseline.RqBaseline and switchyard_bench.SwitchyardBench."""

    name: str
    durable: bool  # keeps a durable per-node record
    nodes_per_run: int

    def prepare(self) -> None: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def members(self) -> list[Member]: ...
    def one(self) -> tuple[float, list[int], list[str]]: ...  # seconds, run ids, errors
    def batch(self, n: int) -> Batch: ...
    def phase_begin(self) -> None: ...
    def phase_end(self, batch: Batch, nodes: int) -> dict[str, Any]: ...


def redis_reset_stats(conn: Any) -> None:
    conn.config_resetstat()


def redis_command_calls(conn: Any) -> tuple[int, dict[str, int]]:
    """Total command calls since the last CONFIG RESETSTAT (minus that command), and the top ten."""
    stats = conn.info("commandstats")
    calls = {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}
    total = sum(calls.values()) - (1 if "config|resetstat" in calls else 0)
    top = dict(sorted(calls.items(), key=lambda kv: -kv[1])[:10])
    return total, top


def redis_server_pid(conn: Any) -> int | None:
    """PID of the Redis/Valkey server when it runs on this machine, else None."""
    host = conn.connection_pool.connection_kwargs.get("host", "")
    if host not in ("127.0.0.1", "localhost", "::1"):
        return None
    pid = int(conn.info("server")["process_id"])
    return pid if psutil.pid_exists(pid) else None
