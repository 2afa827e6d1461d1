#!/usr/bin/env python3
"""Dashboard under load: delay from Postgres to the websocket client, and its cost to the engine.

    .venv/bin/python bench/dashboard_bench.py                    # defaults below, ~3 minutes
    .venv/bin/python bench/dashboard_bench.py --rate 50 --clients 50 --seconds 30 --batch 1000

Runs everything as `make run` does (2 RQ workers, 1 scheduler, the broadcaster, Daphne) on the
embedded servers of .data/bench-dash (durable settings), or on DATABASE_URL/REDIS_URL when both
are set. The database `switchyard_dashbench` is dropped and recreated; Redis is FLUSHALLed.
The workload is the 4-node demo DAG (bench/README.md).

1. delay: RATE runs/s (4 node executions each) for SECONDS, with CLIENTS websocket clients
   subscribed to the overview. Each overview message carries the broadcaster's event cursor
   (every run event up to it was folded in); a node's delay is the arrival (this machine's
   clock) of the first message whose cursor covers its `node.attempt` event, minus the
   event's `at` (= the NodeRun's finished_at, written by the worker). Over every
   (node, client) pair: p50/p95/max. Also messages per second per client, and the CPU of
   the broadcaster and of Daphne (% of one core).
2. throughput: BATCH runs submitted at once, wall time until all finished, node executions/s;
   with 0 clients, then CLIENTS clients, PAIRS times (alternating); medians. One batch takes
   a few seconds and single batches vary by ±25 % here: use enough pairs.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import os
import socket
import statistics
import sys
import threading
import time
from typing import Any

import harness
import psutil
import psycopg
import redis

REPO = harness.REPO
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO))
import services  # noqa: E402

DB = "switchyard_dashbench"
DATA_DIR = REPO / ".data" / "bench-dash"
FINISHED = ("succeeded", "failed", "cancelled")


def with_database(url: str, name: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


class ClientLoop:
    """K websocket clients on their own event loop (thread); they record every message.

    Runs in a child process (`--serve-clients`): Daphne's app already claimed txaio for
    Twisted in the bench process, and the clients' CPU is then kept apart from the bench's.
    """

    def __init__(self, url: str, cookie: str, origin: str, count: int) -> None:
        self.url, self.cookie, self.origin, self.count = url, cookie, origin, count
        self.arrivals: list[list[Any]] = [[] for _ in range(count)]
        self.messages = [0] * count
        self.loop = asyncio.new_event_loop()
        self.opened = 0
        self.all_open: asyncio.Event | None = None
        self.protocols: list[Any] = []
        threading.Thread(target=self.loop.run_forever, name="bench-clients", daemon=True).start()
        if count:
            asyncio.run_coroutine_threadsafe(self.connect_all(), self.loop).result(60)

    async def connect_all(self) -> None:
        from autobahn.asyncio.websocket import WebSocketClientFactory, WebSocketClientProtocol

        clients = self

        class Recorder(WebSocketClientProtocol):
            index = 0

            def onOpen(self) -> None:  # noqa: N802 - autobahn's API
                clients.opened += 1
                if clients.opened == clients.count:
                    clients.all_open.set()

            def onMessage(self, payload: bytes, is_binary: bool) -> None:  # noqa: N802 - autobahn's API
                at = time.time()
                clients.messages[self.index] += 1
                message = json.loads(payload)
                if message["topic"] == "overview":
                    data = message["data"]
                    gaps = data.get("gaps", [])
                    # Complete up to `high` but the listed gaps, unless the list was cut short.
                    high = data.get("high", 0) if len(gaps) < 100 else data.get("cursor", 0)
                    clients.arrivals[self.index].append((at, data.get("cursor", 0), high, gaps))

        self.all_open = asyncio.Event()
        host, port = self.url.split("//")[1].split("/")[0].split(":")
        for index in range(self.count):
            factory = WebSocketClientFactory(self.url, origin=self.origin, headers={"Cookie": self.cookie})
            factory.protocol = Recorder
            _, protocol = await self.loop.create_connection(factory, host, int(port))
            protocol.index = index
            self.protocols.append(protocol)
        # Open means the server accepted the websocket (its login and role check done), not
        # just that TCP connected: fifty checks in a row take a second here, and a phase that
        # started before them would count that second as delay.
        await asyncio.wait_for(self.all_open.wait(), 60)

    def reset(self) -> None:
        self.arrivals = [[] for _ in range(self.count)]
        self.messages = [0] * self.count

    def close(self) -> None:
        for protocol in self.protocols:
            self.loop.call_soon_threadsafe(protocol.sendClose)
        time.sleep(0.5)
        self.loop.call_soon_threadsafe(self.loop.stop)


class Clients:
    """The child process holding the websocket clients; `reset` and `report` over stdin/stdout."""

    def __init__(self, url: str, cookie: str, origin: str, count: int) -> None:
        import subprocess

        self.count = count
        self.child = subprocess.Popen(
            [sys.executable, __file__, "--serve-clients", url, cookie, origin, str(count)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.child.stdout is not None and self.child.stdin is not None
        if self.child.stdout.readline().strip() != "connected":
            raise RuntimeError("the websocket clients could not connect")

    def ask(self, command: str) -> str:
        assert self.child.stdin is not None and self.child.stdout is not None
        self.child.stdin.write(command + "\n")
        self.child.stdin.flush()
        return self.child.stdout.readline()

    def reset(self) -> None:
        self.ask("reset")

    def report(self) -> tuple[list[list[Any]], list[int]]:
        data = json.loads(self.ask("report"))
        return data["arrivals"], data["messages"]

    def close(self) -> None:
        self.ask("close")
        self.child.wait(10)


def serve_clients(url: str, cookie: str, origin: str, count: int) -> None:
    loop = ClientLoop(url, cookie, origin, count)
    print("connected", flush=True)
    for line in sys.stdin:
        command = line.strip()
        if command == "reset":
            loop.reset()
            print("ok", flush=True)
        elif command == "report":
            print(json.dumps({"arrivals": loop.arrivals, "messages": loop.messages}), flush=True)
        elif command == "close":
            loop.close()
            print("bye", flush=True)
            return


def first_covering(arrivals: list[Any], highs: list[int], event_id: int) -> float | None:
    """Arrival time of the first message that had folded in this event."""
    i = bisect.bisect_left(highs, event_id)
    for at, cursor, _, gaps in arrivals[i:]:
        if event_id <= cursor or event_id not in gaps:
            return at
    return None


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.logdir = REPO / "bench" / "results" / time.strftime("dashboard-%Y%m%dT%H%M%SZ", time.gmtime())
        self.logdir.mkdir(parents=True, exist_ok=True)
        self.procs: list[harness.Proc] = []
        self.started_services = False

    # ---------------------------------------------------------------- setup

    def servers(self) -> dict[str, str]:
        if os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL"):
            return {"DATABASE_URL": os.environ["DATABASE_URL"], "REDIS_URL": os.environ["REDIS_URL"]}
        self.started_services = not services.is_up(DATA_DIR)
        return services.up(DATA_DIR)

    def prepare(self) -> None:
        urls = self.servers()
        with psycopg.connect(urls["DATABASE_URL"], autocommit=True) as pg:
            pg.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
            pg.execute(f"CREATE DATABASE {DB}")
        self.env = {
            **os.environ,
            "DATABASE_URL": with_database(urls["DATABASE_URL"], DB),
            "REDIS_URL": urls["REDIS_URL"],
            "DJANGO_SETTINGS_MODULE": "controlplane.settings",
            "LOG_LEVEL": "WARNING",
        }
        redis.Redis.from_url(urls["REDIS_URL"]).flushall()
        python = str(harness.VENV_BIN / "python")
        import subprocess

        subprocess.run(
            [python, "manage.py", "migrate", "--noinput", "-v0"], cwd=REPO, env=self.env, check=True
        )
        os.environ.update({k: self.env[k] for k in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")})
        import django

        django.setup()
        from django.contrib.auth.models import Group, User
        from django.contrib.sessions.backends.db import SessionStore

        from workflows.handlers.demo import DEMO_PROFILE
        from workflows.runs import actions as runs
        from workflows.versions import publish as versions

        workflow = versions.create_workflow("bench-demo", "Bench demo")
        versions.publish_version(versions.create_version(workflow, DEMO_PROFILE))
        workflow.refresh_from_db()
        self.workflow, self.runs = workflow, runs
        viewer = User.objects.create(username="bench-viewer")
        viewer.groups.add(Group.objects.get_or_create(name="viewer")[0])  # a migration may have made it
        session = SessionStore()
        session.update({"_auth_user_id": str(viewer.pk), "_auth_user_backend": "django.contrib.auth.backends.ModelBackend",
                        "_auth_user_hash": viewer.get_session_auth_hash()})  # fmt: skip
        session.create()
        self.cookie = f"sessionid={session.session_key}"

    def start(self) -> None:
        python = str(harness.VENV_BIN / "python")
        self.port = harness.free_port()

        def spawn(cmd: list[str], name: str, group: str) -> None:
            self.procs.append(harness.spawn(cmd, name, group, self.env, self.logdir))

        for i in (1, 2):
            spawn(
                [python, "manage.py", "rqworker", "--name", f"dash-w{i}", "default", "agents"],
                f"worker-{i}",
                "workers",
            )
        spawn([python, "manage.py", "runscheduler", "--name", "dash-s1"], "scheduler", "scheduler")
        spawn([python, "manage.py", "runbroadcaster"], "broadcaster", "broadcaster")
        spawn(  # the web process as `make run` starts it (its connection pool included)
            [
                python,
                "-m",
                "controlplane.webserver",
                "-b",
                "127.0.0.1",
                "-p",
                str(self.port),
                "controlplane.asgi:application",
            ],
            "daphne",
            "web",
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            harness.check_alive(self.procs)
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.2)
        self.warm_up()

    def warm_up(self) -> None:
        ids = [self.start_run() for _ in range(40)]
        self.wait_finished(ids, 60)

    def proc(self, name: str) -> psutil.Process:
        return psutil.Process(next(p.popen.pid for p in self.procs if p.name == name))

    # ---------------------------------------------------------------- runs

    def start_run(self) -> int:
        run, _ = self.runs.start_run(self.workflow, {"user_id": "u-1"})
        return run.pk

    def wait_finished(self, ids: list[int], timeout: float) -> float:
        from workflows.store.models import Run

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if Run.objects.filter(pk__in=ids, status__in=FINISHED).count() == len(ids):
                return time.perf_counter()
            time.sleep(0.05)
        raise RuntimeError(f"runs not finished after {timeout:.0f} s")

    def max_event_id(self) -> int:
        from django.db import connection

        with connection.cursor() as cur:
            cur.execute("SELECT coalesce(max(id), 0) FROM workflows_runevent")
            return int(cur.fetchone()[0])

    # ---------------------------------------------------------------- phases

    def delay_phase(self, clients: Clients) -> dict[str, Any]:
        rate, seconds = self.args.rate, self.args.seconds
        harness.log(
            f"delay: {rate} runs/s ({rate * 4} node executions/s) for {seconds} s, {clients.count} clients"
        )
        first_event = self.max_event_id()
        clients.reset()
        cpu0 = {n: sum(self.proc(n).cpu_times()[:2]) for n in ("broadcaster", "daphne")}
        t0 = time.perf_counter()
        ids = []
        for n in range(int(rate * seconds)):
            pause = t0 + n / rate - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            ids.append(self.start_run())
        behind = time.perf_counter() - t0 - seconds
        self.wait_finished(ids, max(120.0, len(ids) * 0.1))
        time.sleep(1.5)  # the last ticks reach the clients
        wall = time.perf_counter() - t0
        cpu = {n: (sum(self.proc(n).cpu_times()[:2]) - c) / wall * 100 for n, c in cpu0.items()}
        from django.db import connection

        with connection.cursor() as cur:
            cur.execute(
                "SELECT id, extract(epoch FROM at)::float8 FROM workflows_runevent "
                "WHERE kind = 'node.attempt' AND id > %s ORDER BY id",
                [first_event],
            )
            attempts = cur.fetchall()
        delays, missing = [], 0
        all_arrivals, messages = clients.report()
        for arrivals in all_arrivals:
            highs = [high for _, _, high, _ in arrivals]
            for event_id, at in attempts:
                arrival = first_covering(arrivals, highs, event_id)
                if arrival is None:
                    missing += 1
                else:
                    delays.append((arrival - at) * 1000)
        return {
            "node_executions": len(attempts),
            "completed_rate": len(attempts) / wall,  # submission plus draining the backlog
            "submit_behind_s": round(behind, 2),
            "delay_ms": harness.distribution(delays) if delays else {},
            "never_delivered": missing,
            "msgs_per_s_per_client": statistics.mean(messages) / wall if clients.count else 0,
            "cpu_pct": cpu,
        }

    def throughput(self) -> float:
        t0 = time.perf_counter()  # from the first submit to the last finish, as bench/run.py
        ids = [self.start_run() for _ in range(self.args.batch)]
        end = self.wait_finished(ids, 600)
        return len(ids) * 4 / (end - t0)

    def throughput_phase(self) -> dict[str, Any]:
        results: dict[int, list[float]] = {0: [], self.args.clients: []}
        url = f"ws://127.0.0.1:{self.port}/ws/monitor/?topics=overview"
        origin = f"http://127.0.0.1:{self.port}"
        for _ in range(self.args.pairs):
            for k in (0, self.args.clients):
                clients = Clients(url, self.cookie, origin, k) if k else None
                time.sleep(1.0)
                rate = self.throughput()
                harness.log(
                    f"throughput: {self.args.batch} runs with {k} clients: {rate:.0f} node executions/s"
                )
                results[k].append(rate)
                if clients is not None:
                    clients.close()
        return {k: statistics.median(v) for k, v in results.items()}

    def stop(self) -> None:
        harness.stop(self.procs)
        if self.started_services:
            services.down(DATA_DIR)


def main() -> int:
    if sys.argv[1:2] == ["--serve-clients"]:
        serve_clients(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rate", type=int, default=50, help="runs per second in the delay phase (4 nodes each)"
    )
    parser.add_argument("--clients", type=int, default=50, help="websocket clients")
    parser.add_argument("--seconds", type=int, default=30, help="length of the delay phase")
    parser.add_argument("--batch", type=int, default=1000, help="runs per throughput measurement")
    parser.add_argument("--pairs", type=int, default=5, help="throughput measurements per side")
    args = parser.parse_args()
    bench = Bench(args)
    try:
        bench.prepare()
        bench.start()
        url = f"ws://127.0.0.1:{bench.port}/ws/monitor/?topics=overview"
        clients = Clients(url, bench.cookie, f"http://127.0.0.1:{bench.port}", args.clients)
        delay = bench.delay_phase(clients)
        clients.close()
        throughput = bench.throughput_phase()
    finally:
        bench.stop()
    report(args, delay, throughput)
    (bench.logdir / "results.json").write_text(
        json.dumps({"delay": delay, "throughput": throughput}, indent=2)
    )
    return 0


def report(args: argparse.Namespace, delay: dict[str, Any], throughput: dict[int, float]) -> None:
    d = delay["delay_ms"]
    zero, many = throughput[0], throughput[args.clients]
    rows = [
        (
            "node executions/s offered (completed/s over the phase)",
            f"{args.rate * 4} ({delay['completed_rate']:.0f})",
        ),
        ("websocket clients", str(args.clients)),
        ("load average of the machine at the end (2 cores)", f"{os.getloadavg()[0]:.1f}"),
        ("delay Postgres → client, p50 ms", f"{d.get('p50', float('nan')):.0f}"),
        ("delay Postgres → client, p95 ms (target < 500)", f"{d.get('p95', float('nan')):.0f}"),
        ("delay Postgres → client, max ms", f"{d.get('max', float('nan')):.0f}"),
        ("(node, client) pairs measured / never delivered", f"{d.get('n', 0)} / {delay['never_delivered']}"),
        ("messages/s per client", f"{delay['msgs_per_s_per_client']:.1f}"),
        ("broadcaster CPU, % of a core", f"{delay['cpu_pct']['broadcaster']:.1f}"),
        ("Daphne CPU, % of a core", f"{delay['cpu_pct']['daphne']:.1f}"),
        ("engine node executions/s, 0 clients", f"{zero:.0f}"),
        (f"engine node executions/s, {args.clients} clients", f"{many:.0f}"),
        (f"throughput with {args.clients} clients vs none (target ≥ 90%)", f"{many / zero * 100:.1f}%"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"\n| {'figure'.ljust(width)} | value |\n|{'-' * (width + 2)}|-------|")
    for name, value in rows:
        print(f"| {name.ljust(width)} | {value} |")


if __name__ == "__main__":
    sys.exit(main())
