#!/usr/bin/env python3
"""`make chaos`: start runs through the API while killing everything, then check PostgreSQL.

It starts its own PostgreSQL and Valkey (in .data/chaos, or --data; durable, as `make run`
has them: with the tests' ephemeral settings, synchronous_commit off, a PostgreSQL kill
loses the last commits, and a first version of this check rightly reported such a run as
lost), two web processes
(Daphne), two schedulers and three workers, publishes three workflows (a fan-out/fan-in of
`core.echo`, a chain whose middle step fails its first attempt, a chain with a short delay)
and starts --runs runs through the REST API, each with its own Idempotency-Key, retrying a
refused or unanswered start with the same key as a well-behaved client does. Meanwhile:
- every --kill-every seconds a random worker, scheduler or web process is killed with
  SIGKILL and started again a moment later;
- at a quarter of the load Redis is flushed; at 45 % Valkey is killed with SIGKILL and
  restarted 2 s later; at 65 % PostgreSQL's postmaster is killed with SIGKILL and restarted
  2 s later.
Then it waits for every run to end and checks, in PostgreSQL:
- lost: a start answered 2xx whose run does not exist; doubled: a key with two runs;
- stuck: a run not finished by the deadline; failed: a run that did not succeed;
- an attempt recorded twice, or a node recorded as succeeded twice;
- wrong output: the last node's output does not carry the run's input;
- a start answered 5xx other than 503 (a committed start must never answer 5xx).
It prints the figures (and recovery times: from a store's return to the first node
finishing after it) and exits 1 if any check fails. `tests/integration/test_chaos.py` runs a
short version (a few hundred runs) in CI.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
VENV_PYTHON = REPO / ".venv" / "bin" / "python"
if __name__ == "__main__" and Path(sys.prefix).resolve() != VENV_PYTHON.parent.parent.resolve():
    if not VENV_PYTHON.exists():
        sys.exit("No virtualenv in .venv: run `make venv` first.")
    os.execv(VENV_PYTHON, [str(VENV_PYTHON), *sys.argv])

import httpx  # noqa: E402

sys.path.insert(0, str(REPO / "scripts"))
import services  # noqa: E402

BIN = Path(sys.executable).parent
WEIGHTS = {"web": 1, "scheduler": 2, "worker": 3}  # how often each role is the one killed

MAP_ITEMS = 50
VARIANTS = 3  # inputs come in this many variants, each with a chaos-free reference run


def _compensated(node_id: str) -> dict[str, Any]:
    return {
        "id": node_id,
        "handler": "chaos.step",
        "compensate": {"handler": "chaos.undo", "retry": {"max_attempts": 3, "backoff_seconds": 0.1}},
    }


WORKFLOWS: dict[str, dict[str, Any]] = {
    "chaos-fanout": {
        "nodes": [
            {"id": "a", "handler": "core.echo"},
            {"id": "b", "handler": "core.echo"},
            {"id": "c", "handler": "core.echo"},
            {"id": "last", "handler": "core.echo"},
        ],
        "edges": [
            {"source": "a", "target": "b"},
            {"source": "a", "target": "c"},
            {"source": "b", "target": "last"},
            {"source": "c", "target": "last"},
        ],
    },
    "chaos-retry": {
        "nodes": [
            {"id": "a", "handler": "core.echo"},
            {
                "id": "flaky",
                "handler": "core.flaky",
                "config": {"succeed_on_attempt": 2},
                "retry": {"max_attempts": 3, "backoff_seconds": 0.1},
            },
            {"id": "last", "handler": "core.echo"},
        ],
        "edges": [{"source": "a", "target": "flaky"}, {"source": "flaky", "target": "last"}],
    },
    "chaos-delay": {
        "nodes": [
            {"id": "a", "handler": "core.delay", "config": {"seconds": 0.05}},
            {"id": "last", "handler": "core.echo"},
        ],
        "edges": [{"source": "a", "target": "last"}],
    },
    # An agent loop against the scripted provider: a turn that calls chaos.lookup, then an answer.
    "chaos-agent": {
        "nodes": [
            {
                "id": "agent",
                "handler": "llm.agent",
                "config": {
                    "system": "You are a support agent. Use the tool.",
                    "prompt": "Where is order {input.order_id}?",
                    "tools": ["chaos.lookup"],
                    "max_steps": 4,
                    "timeout_seconds": 30,
                },
                "retry": {"max_attempts": 3, "backoff_seconds": 0.2},
                "timeout_seconds": 60,
                "queue": "agents",
            },
            {"id": "last", "handler": "core.echo"},
        ],
        "edges": [{"source": "agent", "target": "last"}],
    },
    "chaos-map": {
        "nodes": [
            {
                "id": "square",
                "handler": "chaos.item",
                "map": "input.items",
                "max_parallel": 10,
                "retry": {"max_attempts": 2, "backoff_seconds": 0.1},
            },
            {"id": "last", "handler": "core.echo"},
        ],
        "edges": [{"source": "square", "target": "last"}],
    },
    "chaos-child": {
        "nodes": [
            {"id": "call", "handler": "workflow.run", "config": {"workflow": "chaos-fanout"}},
            {"id": "last", "handler": "core.echo"},
        ],
        "edges": [{"source": "call", "target": "last"}],
    },
    # A saga whose last step always fails: the two steps before it are undone, newest first.
    "chaos-saga": {
        "nodes": [
            _compensated("reserve"),
            _compensated("charge"),
            {"id": "ship", "handler": "core.fail", "config": {"message": "chaos: cannot ship"}},
        ],
        "edges": [{"source": "reserve", "target": "charge"}, {"source": "charge", "target": "ship"}],
    },
    # Decided through the API by the approver thread (decide_approvals).
    "chaos-approval": {
        "nodes": [
            {"id": "draft", "handler": "core.echo"},
            {"id": "approve", "handler": "human.approval", "config": {"title": "Chaos approval"}},
            {"id": "last", "handler": "core.echo"},
        ],
        "edges": [{"source": "draft", "target": "approve"}, {"source": "approve", "target": "last"}],
    },
    # A timer, then an event that the poster thread sends through the API (post_events).
    "chaos-wait": {
        "nodes": [
            {"id": "timer", "handler": "wait.timer", "config": {"seconds": 0.5}},
            {"id": "event", "handler": "wait.event", "config": {"key": "input.key"}},
            {"id": "last", "handler": "core.echo"},
        ],
        "edges": [{"source": "timer", "target": "event"}, {"source": "event", "target": "last"}],
    },
}
EXPECTED_STATUS = {"chaos-saga": "compensated"}  # every other workflow's runs succeed


def run_input(slug: str, variant: int, key: str) -> dict[str, Any]:
    """The input of a run: its variant, a key of its own, and what its workflow reads."""
    body: dict[str, Any] = {"v": variant, "key": key}
    if slug == "chaos-map":
        body["items"] = [variant * 100 + n for n in range(MAP_ITEMS)]
    if slug == "chaos-agent":
        body["order_id"] = f"A-{1000 + variant}"
    return body


def say(message: str) -> None:
    print(time.strftime("%H:%M:%S"), message, flush=True)


@dataclass
class Role:
    """A runtime process the chaos kills and starts again."""

    name: str
    argv: Callable[[], list[str]]  # called at each start: a worker needs a fresh name
    env: dict[str, str]
    logs: Path
    process: subprocess.Popen[bytes] | None = None
    kills: int = 0

    def start(self) -> None:
        with open(self.logs / f"{self.name}.log", "ab") as out:
            self.process = subprocess.Popen(
                self.argv(),
                cwd=REPO,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def kill(self, sig: signal.Signals = signal.SIGKILL) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)
            self.process.wait()


@dataclass
class Tally:
    started: dict[str, int] = field(default_factory=dict)  # key -> run id, from a 2xx answer
    gave_up: list[str] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    server_errors: list[str] = field(default_factory=list)  # 5xx other than 503 (any 5xx when rolling)
    decided: set[int] = field(default_factory=set)  # approvals the API said it decided
    events_posted: int = 0
    refused_connections: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, status: int, what: str, rolling: bool) -> None:
        with self.lock:
            self.statuses[status] = self.statuses.get(status, 0) + 1
            if status >= 500 and (rolling or status != 503):
                self.server_errors.append(what)


@dataclass
class Client:
    """The API as a careful client uses it: any web process, retried on a refusal."""

    ports: list[int]
    token: str
    tally: Tally
    rolling: bool

    def call(self, method: str, path: str, deadline: float, **kwargs: Any) -> httpx.Response | None:
        """Send until answered below 500 (or 503, retried too) or the deadline; None if never."""
        headers = {"Authorization": f"Bearer {self.token}", **kwargs.pop("headers", {})}
        while time.monotonic() < deadline:
            port = random.choice(self.ports)
            try:
                answer = httpx.request(
                    method, f"http://127.0.0.1:{port}{path}", headers=headers, timeout=10, **kwargs
                )
            except httpx.HTTPError:
                with self.tally.lock:
                    self.tally.refused_connections += 1
                time.sleep(0.2)  # that web process is down (or killed mid-request): try again
                continue
            self.tally.count(
                answer.status_code, f"{method} {path}: {answer.status_code} {answer.text[:200]}", self.rolling
            )
            if answer.status_code < 500:
                return answer
            time.sleep(0.2)
        return None


def setup_django(urls: dict[str, str]) -> None:
    os.environ.update(urls)
    os.environ["DJANGO_SETTINGS_MODULE"] = "controlplane.settings"
    sys.path.insert(0, str(REPO))
    import django

    django.setup()


def prepare(demo_url: str) -> str:
    """Publish the workflows, register the demo provider; return an admin API key's plaintext."""
    from django.contrib.auth import get_user_model

    from workflows.integrations import keys
    from workflows.llm import demo_server, providers
    from workflows.store.models import Workflow
    from workflows.versions import publish as versions

    providers.register_demo(demo_url, demo_server.MODEL)
    user = get_user_model().objects.filter(username="chaos").first()
    user = user or get_user_model().objects.create_superuser("chaos", "chaos@localhost")
    for slug, definition in WORKFLOWS.items():  # chaos-fanout first: chaos-child calls it
        workflow = Workflow.objects.filter(slug=slug).first() or versions.create_workflow(slug, slug)
        versions.publish_version(versions.create_version(workflow, definition))
    _, plaintext = keys.create_key(user, f"chaos {uuid.uuid4().hex[:6]}", ["admin"])
    return plaintext


def slug_and_variant(i: int) -> tuple[str, int]:
    slugs = list(WORKFLOWS)
    return slugs[i % len(slugs)], (i // len(slugs)) % VARIANTS


def start_one(key: str, slug: str, variant: int, client: Client, patience: float) -> None:
    """Start one run with its own Idempotency-Key; for chaos-wait, post its event too.

    A start is retried for `patience` seconds from when a client thread takes it up (not
    from when the load began: on a loaded machine the last starts were taken up after the
    load's deadline had passed and gave up without a try)."""
    deadline = time.monotonic() + patience
    answer = client.call(
        "POST",
        f"/api/v1/workflows/{slug}/runs",
        deadline,
        json={"input": run_input(slug, variant, key)},
        headers={"Idempotency-Key": key},
    )
    if answer is None or answer.status_code not in (200, 201):
        with client.tally.lock:
            client.tally.gave_up.append(f"{key}: {answer.status_code if answer else 'no answer'}")
        return
    with client.tally.lock:
        client.tally.started[key] = answer.json()["id"]
    if slug == "chaos-wait":
        # Sometimes before the node waits (kept, consumed when it does), sometimes after.
        time.sleep(random.uniform(0, 1.5))
        posted = client.call(
            "POST",
            "/api/v1/events",
            time.monotonic() + patience,
            json={"key": key, "payload": {"v": variant}},
        )
        with client.tally.lock:
            client.tally.events_posted += posted is not None and posted.status_code == 202


def decide_approvals(client: Client, stop: threading.Event) -> None:
    """Approve every pending chaos approval through the API, as a script of a person would."""
    while not stop.wait(0.5):
        deadline = time.monotonic() + 10
        page = client.call("GET", "/api/v1/approvals?workflow=chaos-approval&limit=200", deadline)
        if page is None or page.status_code != 200:
            continue
        for approval in page.json()["items"]:
            answer = client.call(
                "POST",
                f"/api/v1/approvals/{approval['id']}/decide",
                deadline,
                json={"decision": "approve", "comment": "chaos"},
            )
            if answer is not None and answer.status_code == 200:
                with client.tally.lock:
                    client.tally.decided.add(approval["id"])


def run_reference(client: Client, tag: str, settle: float) -> dict[tuple[str, int], Any]:
    """Run each workflow once per variant before any chaos; return their normalized outputs."""
    deadline = time.monotonic() + settle
    keys = {(slug, v): f"ref-{tag}-{slug}-{v}" for slug in WORKFLOWS for v in range(VARIANTS)}
    with ThreadPoolExecutor(max_workers=8) as pool:
        for (slug, v), key in keys.items():
            pool.submit(start_one, key, slug, v, client, settle)
    wait_for_runs(f"ref-{tag}-%", deadline)
    outputs = run_outputs(f"ref-{tag}-%")
    reference = {}
    for (slug, v), key in keys.items():
        status, nodes = outputs.get(key, (None, None))
        if status != EXPECTED_STATUS.get(slug, "succeeded"):
            raise SystemExit(f"chaos: the chaos-free reference run of {slug} ended {status}, not as expected")
        reference[(slug, v)] = nodes
    return reference


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=25.0, help="starts per second")
    parser.add_argument("--kill-every", type=float, default=1.5, help="seconds between process kills")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--data", type=Path, default=REPO / ".data" / "chaos")
    parser.add_argument("--settle", type=float, default=180.0, help="seconds allowed for runs to end")
    parser.add_argument(
        "--rolling",
        action="store_true",
        help="restart every process one at a time (SIGTERM, drain, start) instead of killing; no 5xx allowed",
    )
    parser.add_argument(
        "--without", action="append", default=[], choices=sorted(WORKFLOWS), help="leave a workflow out"
    )
    args = parser.parse_args(argv)
    for slug in args.without:
        WORKFLOWS.pop(slug)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    random.seed(seed)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    what = "rolling restarts" if args.rolling else f"a kill every {args.kill_every:g} s"
    say(f"chaos: {args.runs} runs of {len(WORKFLOWS)} workflows at {args.rate:g}/s, {what}, seed {seed}")

    services.clean(args.data)
    urls = services.up(args.data)
    logs = args.data / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    ledger = args.data / "ledger.tsv"
    demo_port = free_port()
    demo_url = f"http://127.0.0.1:{demo_port}/v1"
    settings_env = {
        **urls,
        "SWITCHYARD_HANDLER_MODULES": "workflows.handlers.builtin,workflows.handlers.demo,chaos_handlers",
        "SWITCHYARD_DEMO_LLM_URL": demo_url,
        # The scripted provider is on loopback, which the egress policy refuses: its port only.
        "SWITCHYARD_EGRESS_ALLOW": f"127.0.0.1:{demo_port}",
        "CHAOS_LEDGER": str(ledger),
    }
    env = {
        **os.environ,
        **settings_env,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "scripts"), os.environ.get("PYTHONPATH")])),
        "DJANGO_SETTINGS_MODULE": "controlplane.settings",
        "PYTHONUNBUFFERED": "1",
        "SWITCHYARD_WORKER_LOST_AFTER_SECONDS": "3",
        "SWITCHYARD_RECONCILE_AFTER_SECONDS": "1",
    }
    python = str(BIN / "python")
    subprocess.run([python, "manage.py", "migrate", "-v", "0", "--noinput"], cwd=REPO, env=env, check=True)
    os.environ.update(settings_env)
    setup_django(urls)
    token = prepare(demo_url)
    ports = [free_port(), free_port()]
    # The provider is outside the platform: it stays up (no word delay: turns are not the test).
    demo = Role("demo-llm", lambda: [python, "-m", "workflows.llm.demo_server", "--port", str(demo_port), "--word-delay", "0"], env, logs)  # fmt: skip
    roles = make_roles(python, ports, env, logs, args.workers)
    demo.start()
    for role in roles:
        role.start()
    tally = Tally()
    client = Client(ports, token, tally, args.rolling)
    returned: dict[str, float] = {}
    restarts: list[dict[str, Any]] = []
    tag = uuid.uuid4().hex[:8]
    stop_deciding = threading.Event()
    approver = threading.Thread(target=decide_approvals, args=(client, stop_deciding), daemon=True)
    try:
        wait_until(lambda: all(services.accepts(p) for p in ports), 60, "the web processes")
        approver.start()
        began = time.monotonic()
        reference = run_reference(client, tag, args.settle)
        say(f"chaos-free reference: {len(reference)} runs in {time.monotonic() - began:.0f} s")
        load_seconds = args.runs / args.rate
        done = threading.Event()
        if args.rolling:
            chaos = threading.Thread(target=roll, args=(roles, ports, done, restarts), daemon=True)
        else:
            chaos = threading.Thread(
                target=wreak, args=(roles, args, load_seconds, done, returned), daemon=True
            )
        started_at = time.monotonic()
        chaos.start()
        with ThreadPoolExecutor(max_workers=16) as pool:
            for i in range(args.runs):
                slug, variant = slug_and_variant(i)
                pool.submit(start_one, f"chaos-{tag}-{i}", slug, variant, client, args.settle)
                time.sleep(max(0.0, started_at + (i + 1) / args.rate - time.monotonic()))
        if args.rolling:  # one whole round at least, however short the load
            wait_until(lambda: len(restarts) >= len(roles), 600, "a full round of restarts")
        done.set()
        chaos.join()
        say(
            f"load done in {time.monotonic() - started_at:.0f} s; {len(tally.started) - len(reference)} starts accepted; letting runs end"
        )
        for role in roles:
            if role.process is None or role.process.poll() is not None:
                role.start()
        report = settle_and_check(tag, tally, args.settle, returned, reference, ledger)
        report["seconds"] = round(time.monotonic() - started_at)
        report["kills"] = {r.name: r.kills for r in roles}
        if args.rolling:
            report["restarts"] = restarts
            report["violations"]["restart_not_clean"] = [r for r in restarts if not r["clean"]]
    finally:
        stop_deciding.set()
        for role in [*roles, demo]:
            role.kill(signal.SIGTERM)
        services.down(args.data)
    print(json.dumps(report, indent=2))
    violations = {k: v for k, v in report["violations"].items() if v}
    if violations:
        say(f"chaos: FAILED {violations} (servers' data and logs kept in {args.data})")
        return 1
    services.clean(args.data)
    say(
        "chaos: no run lost, stuck or doubled; no node succeeded twice; outputs right; no 5xx for a committed start"
    )
    say(
        "chaos: no tool call repeated once recorded, no compensation run twice, no approval lost, "
        "no map item done twice; outputs equal to the chaos-free reference"
    )
    return 0


def make_roles(python: str, ports: list[int], env: dict[str, str], logs: Path, workers: int) -> list[Role]:
    """Two web processes, two schedulers and WORKERS workers (each start under a fresh name)."""
    daphne = [python, "-m", "controlplane.webserver", "-b", "127.0.0.1", "controlplane.asgi:application"]
    worker = [
        python,
        "manage.py",
        "rqworker",
        "-v",
        "0",
        "--worker-class",
        "workflows.runtime.worker.NodeWorker",
    ]
    roles = [
        Role(f"web-{n}", lambda p=port: [*daphne, "-p", str(p)], env, logs) for n, port in enumerate(ports, 1)
    ]
    roles += [
        Role(
            f"scheduler-{n}",
            lambda n=n: [python, "manage.py", "runscheduler", "--name", f"chaos-s{n}"],
            env,
            logs,
        )
        for n in (1, 2)
    ]
    roles += [
        Role(
            f"worker-{n}",
            lambda n=n: [*worker, "--name", f"chaos-w{n}-{uuid.uuid4().hex[:6]}", "default", "agents"],
            env,
            logs,
        )
        for n in range(1, workers + 1)
    ]
    return roles


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"chaos: timed out waiting for {what}")
        time.sleep(0.1)


def wreak(
    roles: list[Role],
    args: argparse.Namespace,
    load_seconds: float,
    done: threading.Event,
    returned: dict[str, float],
) -> None:
    """Kill random processes, and each store once, while the load runs."""
    began = time.monotonic()
    store_events = [(0.25, "flush"), (0.45, "valkey"), (0.65, "postgres")]
    while not done.is_set():
        elapsed = (time.monotonic() - began) / load_seconds
        while store_events and elapsed >= store_events[0][0]:
            _, what = store_events.pop(0)
            outage(what, args.data, returned)
        # Web processes take longest to come back (Django's import): killed less often, so
        # that starts get through between kills on a slow machine too.
        victim = random.choices(roles, weights=[WEIGHTS[r.name.split("-")[0]] for r in roles])[0]
        victim.kill()
        victim.kills += 1
        say(f"killed {victim.name} (SIGKILL)")
        done.wait(random.uniform(0.2, 0.8))
        victim.start()
        done.wait(args.kill_every)
    for _, what in store_events:  # a load shorter than expected still gets every outage
        outage(what, args.data, returned)


def outage(what: str, data: Path, returned: dict[str, float]) -> None:
    import redis

    urls = dict(line.split("=", 1) for line in (data / "services.env").read_text().split())
    if what == "flush":
        redis.Redis.from_url(urls["REDIS_URL"]).flushall()
        say("flushed Redis")
        returned["redis flush"] = time.time()
        return
    pid = services.server_pids(data)[what]
    assert pid, f"no {what} process to kill"
    os.kill(pid, signal.SIGKILL)
    say(f"killed {what} (SIGKILL, pid {pid}); restarting it in 2 s")
    time.sleep(2)
    services.up(data)
    returned[f"{what} restart"] = time.time()
    say(f"{what} is back")


def roll(roles: list[Role], ports: list[int], done: threading.Event, restarts: list[dict[str, Any]]) -> None:
    """Restart every process one at a time, as a deploy does, round after round until done.

    SIGTERM, wait for the process to exit by itself (a worker drains within
    SWITCHYARD_WORKER_DRAIN_SECONDS, a scheduler finishes its batch), start it again and wait
    until it serves before the next. A process still alive after 30 s is killed and the
    restart reported as not clean; the other web process serves while one restarts.
    """
    while not done.is_set():
        for role in roles:
            began = time.monotonic()
            assert role.process is not None
            os.killpg(role.process.pid, signal.SIGTERM)
            try:
                code = role.process.wait(30)
            except subprocess.TimeoutExpired:
                role.kill()
                code = None
            stopped = time.monotonic() - began
            role.start()
            if role.name.startswith("web"):
                port = ports[int(role.name.split("-")[1]) - 1]
                wait_until(lambda p=port: services.accepts(p), 60, f"{role.name} to serve again")
            else:
                time.sleep(2)  # Django's import and the first claim
            restarts.append(
                {
                    "role": role.name,
                    "exit": code,
                    "stop_seconds": round(stopped, 1),
                    "clean": code is not None,
                }
            )
            say(f"restarted {role.name} (exit {code} after {stopped:.1f} s)")
            if done.is_set():
                return


def wait_for_runs(pattern: str, deadline: float) -> None:
    from django.db import close_old_connections, connection

    close_old_connections()
    while time.monotonic() < deadline:
        with connection.cursor() as cur:
            cur.execute(
                "SELECT count(*) FROM workflows_run WHERE idempotency_key LIKE %s AND status <> ALL(%s)",
                [pattern, sorted(FINAL)],
            )
            if cur.fetchone()[0] == 0:
                return
        time.sleep(1)


FINAL = {"succeeded", "failed", "cancelled", "compensated", "compensation_failed"}
# Fields of outputs that differ between two correct runs of the same input: times, ids, who.
VOLATILE = {"at", "decided_at", "decided_by", "by", "run", "run_id", "child_run", "child_run_id", "duration_ms",
            "started_at", "finished_at", "waited_until", "usage", "latency_ms", "steps", "call_id", "id"}  # fmt: skip


def normalize(value: Any, key: str) -> Any:
    """An output as a chaos-free run of the same variant would have it: the run's own key and
    volatile fields taken out."""
    if isinstance(value, dict):
        return {k: normalize(v, key) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [normalize(v, key) for v in value]
    if isinstance(value, str):
        return value.replace(key, "<key>")
    return value


def run_outputs(pattern: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """Each run's status and its nodes' outputs (normalized), by idempotency key."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(
            """SELECT r.idempotency_key, r.status, n.node_id, n.output FROM workflows_run r
               JOIN workflows_noderun n ON n.run_id = r.id WHERE r.idempotency_key LIKE %s""",
            [pattern],
        )
        outputs: dict[str, tuple[str, dict[str, Any]]] = {}
        for key, status, node_id, output in cur.fetchall():
            outputs.setdefault(key, (status, {}))[1][node_id] = normalize(
                json.loads(output) if isinstance(output, str) else output, key
            )
    return outputs


def repeats_after_recorded(ledger: Path) -> dict[str, list[str]]:
    """Executions that began after their tool call, map item or compensation was recorded finished."""
    from django.db import connection

    executed: dict[tuple[str, str], list[float]] = {}
    if ledger.exists():
        for line in ledger.read_text().splitlines():
            what, key, at = line.split("\t")
            executed.setdefault((what, key), []).append(float(at))
    with connection.cursor() as cur:
        cur.execute(
            "SELECT idempotency_key, extract(epoch FROM finished_at) FROM workflows_agentstep WHERE kind = 'tool' AND status = 'ok'"
        )
        recorded = [("tool", key, float(at)) for key, at in cur.fetchall()]
        cur.execute(
            """SELECT i.run_id || ':' || n.node_id || ':' || i.index, extract(epoch FROM i.finished_at)
               FROM workflows_mapitem i JOIN workflows_noderun n ON n.id = i.node_run_id WHERE i.status = 'succeeded'"""
        )
        recorded += [("item", key, float(at)) for key, at in cur.fetchall()]
        cur.execute(
            """SELECT run_id || ':' || node_id, extract(epoch FROM finished_at) FROM workflows_noderun
               WHERE node_id LIKE '%%~compensate' AND status = 'succeeded'"""
        )
        recorded += [("undo", key, float(at)) for key, at in cur.fetchall()]
    repeats: dict[str, list[str]] = {"tool": [], "item": [], "undo": []}
    for what, key, finished in recorded:
        if any(at > finished for at in executed.get((what, key), [])):
            repeats[what].append(key)
    repeats["never_executed"] = [f"{w} {k}" for w, k, _ in recorded if (w, k) not in executed]
    return repeats


def settle_and_check(
    tag: str,
    tally: Tally,
    settle: float,
    returned: dict[str, float],
    reference: dict[tuple[str, int], Any],
    ledger: Path,
) -> dict[str, Any]:
    from django.db import close_old_connections, connection

    close_old_connections()
    prefix = f"chaos-{tag}-%"
    wait_for_runs(prefix, time.monotonic() + settle)
    with connection.cursor() as cur:
        cur.execute(
            "SELECT idempotency_key, count(*), min(id), min(status), max(status) FROM workflows_run WHERE idempotency_key LIKE %s GROUP BY 1",
            [prefix],
        )
        by_key = {key: (n, run_id, lo, hi) for key, n, run_id, lo, hi in cur.fetchall()}
        cur.execute(
            """SELECT count(*) FROM (SELECT 1 FROM workflows_runevent e JOIN workflows_run r ON r.id = e.run_id
               WHERE r.idempotency_key LIKE %s AND e.kind = 'node.attempt'
               GROUP BY e.run_id, e.node_id, e.attempt HAVING count(*) > 1) t""",
            [prefix],
        )
        attempts_twice = cur.fetchone()[0]
        cur.execute(
            """SELECT count(*) FROM (SELECT 1 FROM workflows_runevent e JOIN workflows_run r ON r.id = e.run_id
               WHERE r.idempotency_key LIKE %s AND e.kind = 'node.attempt' AND e.data->>'status' = 'succeeded'
               GROUP BY e.run_id, e.node_id HAVING count(*) > 1) t""",
            [prefix],
        )
        succeeded_twice = cur.fetchone()[0]
        cur.execute(
            """SELECT count(*) FROM workflows_run r JOIN workflows_noderun n ON n.run_id = r.id AND n.node_id = 'last'
               WHERE r.idempotency_key LIKE %s AND r.status = 'succeeded'
               AND (n.output->'input') IS DISTINCT FROM r.input""",
            [prefix],
        )
        wrong_output = cur.fetchone()[0]
        cur.execute(
            """SELECT w.id, w.outcome FROM workflows_wait w JOIN workflows_run r ON r.id = w.run_id
               WHERE r.idempotency_key LIKE %s AND w.kind = 'human.approval'""",
            [prefix],
        )
        approvals = dict(cur.fetchall())
        cur.execute(
            """SELECT coalesce(sum(n.lost), 0) FROM workflows_noderun n JOIN workflows_run r ON r.id = n.run_id
               WHERE r.idempotency_key LIKE %s""",
            [prefix],
        )
        lost_attempts = cur.fetchone()[0]
        recovery = {}
        for what, at in returned.items():
            cur.execute(
                "SELECT extract(epoch FROM min(finished_at)) FROM workflows_noderun WHERE finished_at > to_timestamp(%s)",
                [at],
            )
            first = cur.fetchone()[0]
            recovery[what] = None if first is None else round((float(first) - at) * 1000)
    outputs = run_outputs(prefix)
    kinds: dict[str, int] = {}
    unlike_reference = []
    not_as_expected = []
    for key, (status, nodes) in outputs.items():
        slug, variant = slug_and_variant(int(key.rsplit("-", 1)[1]))
        kinds[slug] = kinds.get(slug, 0) + 1
        if status != EXPECTED_STATUS.get(slug, "succeeded"):
            not_as_expected.append(f"{key} ({slug}): {status}")
        elif nodes != reference[(slug, variant)]:
            unlike_reference.append(f"{key} ({slug})")
    started = [k for k in tally.started if k.startswith(f"chaos-{tag}-")]  # not the reference runs
    lost = [k for k in started if k not in by_key]
    doubled = [k for k, (n, *_rest) in by_key.items() if n > 1]
    stuck = [k for k, (_n, _id, lo, hi) in by_key.items() if lo not in FINAL or hi not in FINAL]
    repeats = repeats_after_recorded(ledger)
    return {
        "starts_accepted": len(started),
        "runs_in_postgres": len(by_key),
        "runs_by_workflow": dict(sorted(kinds.items())),
        "answers": dict(sorted(tally.statuses.items())),
        "refused_connections_retried": tally.refused_connections,
        "approvals_decided_through_api": len(tally.decided),
        "events_posted_through_api": tally.events_posted,
        "attempts_lost_with_their_worker": lost_attempts,
        "recovery_ms_from_store_return_to_first_node_finished": recovery,
        "violations": {
            "lost": lost[:20],
            "doubled": doubled[:20],
            "stuck": stuck[:20],
            "not_as_expected": not_as_expected[:20],
            "attempt_recorded_twice": attempts_twice,
            "node_succeeded_twice": succeeded_twice,
            "wrong_output": wrong_output,
            "unlike_chaos_free_reference": unlike_reference[:20],
            "tool_call_repeated_after_recorded": repeats["tool"][:20],
            "map_item_done_twice": repeats["item"][:20],
            "compensation_run_twice": repeats["undo"][:20],
            "recorded_but_never_executed": repeats["never_executed"][:20],
            "approval_lost": [a for a in tally.decided if a in approvals and approvals[a] != "decided"][:20]
            + [a for a, outcome in approvals.items() if outcome != "decided"][:20],
            "server_errors": tally.server_errors[:20],
            "gave_up_starting": tally.gave_up[:20],
        },
    }


if __name__ == "__main__":
    sys.exit(main())
