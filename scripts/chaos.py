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
TERMINAL = {"succeeded", "failed", "cancelled"}
WEIGHTS = {"web": 1, "scheduler": 2, "worker": 3}  # how often each role is the one killed

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
}


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
    server_errors: list[str] = field(default_factory=list)  # 5xx other than 503
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, status: int) -> None:
        with self.lock:
            self.statuses[status] = self.statuses.get(status, 0) + 1


def setup_django(urls: dict[str, str]) -> None:
    os.environ.update(urls)
    os.environ["DJANGO_SETTINGS_MODULE"] = "controlplane.settings"
    sys.path.insert(0, str(REPO))
    import django

    django.setup()


def prepare() -> str:
    """Publish the workflows and return an admin API key's plaintext."""
    from django.contrib.auth import get_user_model

    from workflows.integrations import keys
    from workflows.store.models import Workflow
    from workflows.versions import publish as versions

    user = get_user_model().objects.filter(username="chaos").first()
    user = user or get_user_model().objects.create_superuser("chaos", "chaos@localhost")
    for slug, definition in WORKFLOWS.items():
        workflow = Workflow.objects.filter(slug=slug).first() or versions.create_workflow(slug, slug)
        versions.publish_version(versions.create_version(workflow, definition))
    _, plaintext = keys.create_key(user, f"chaos {uuid.uuid4().hex[:6]}", ["admin"])
    return plaintext


def start_one(i: int, tag: str, ports: list[int], token: str, tally: Tally, deadline: float) -> None:
    slug = list(WORKFLOWS)[i % len(WORKFLOWS)]
    key = f"chaos-{tag}-{i}"
    body = {"input": {"i": i, "tag": tag}}
    headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": key}
    while time.monotonic() < deadline:
        port = random.choice(ports)
        try:
            answer = httpx.post(
                f"http://127.0.0.1:{port}/api/v1/workflows/{slug}/runs",
                json=body,
                headers=headers,
                timeout=10,
            )
        except httpx.HTTPError:
            time.sleep(0.2)  # that web process is down (or killed mid-request): try again, same key
            continue
        tally.count(answer.status_code)
        if answer.status_code in (200, 201):
            with tally.lock:
                tally.started[key] = answer.json()["id"]
            return
        if answer.status_code >= 500 and answer.status_code != 503:
            with tally.lock:
                tally.server_errors.append(f"{key}: {answer.status_code} {answer.text[:200]}")
        time.sleep(0.2)
    tally.gave_up.append(key)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=25.0, help="starts per second")
    parser.add_argument("--kill-every", type=float, default=1.5, help="seconds between process kills")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--data", type=Path, default=REPO / ".data" / "chaos")
    parser.add_argument("--settle", type=float, default=180.0, help="seconds allowed for runs to end")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    random.seed(seed)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    say(f"chaos: {args.runs} runs at {args.rate:g}/s, a kill every {args.kill_every:g} s, seed {seed}")

    services.clean(args.data)
    urls = services.up(args.data)
    logs = args.data / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        **urls,
        "DJANGO_SETTINGS_MODULE": "controlplane.settings",
        "PYTHONUNBUFFERED": "1",
        "SWITCHYARD_WORKER_LOST_AFTER_SECONDS": "3",
        "SWITCHYARD_RECONCILE_AFTER_SECONDS": "1",
    }
    python = str(BIN / "python")
    subprocess.run([python, "manage.py", "migrate", "-v", "0", "--noinput"], cwd=REPO, env=env, check=True)
    setup_django(urls)
    token = prepare()
    ports = [free_port(), free_port()]
    queues = ["default", "agents"]
    daphne = [str(BIN / "daphne"), "-b", "127.0.0.1", "controlplane.asgi:application"]
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
            lambda n=n: [*worker, "--name", f"chaos-w{n}-{uuid.uuid4().hex[:6]}", *queues],
            env,
            logs,
        )
        for n in range(1, args.workers + 1)
    ]
    for role in roles:
        role.start()
    tally = Tally()
    returned: dict[str, float] = {}
    tag = uuid.uuid4().hex[:8]
    try:
        wait_until(lambda: all(services.accepts(p) for p in ports), 60, "the web processes")
        load_seconds = args.runs / args.rate
        done = threading.Event()
        chaos = threading.Thread(target=wreak, args=(roles, args, load_seconds, done, returned), daemon=True)
        started_at = time.monotonic()
        chaos.start()
        deadline = started_at + load_seconds + args.settle
        with ThreadPoolExecutor(max_workers=16) as pool:
            for i in range(args.runs):
                pool.submit(start_one, i, tag, ports, token, tally, deadline)
                time.sleep(max(0.0, started_at + (i + 1) / args.rate - time.monotonic()))
        done.set()
        chaos.join()
        say(
            f"load done in {time.monotonic() - started_at:.0f} s; {len(tally.started)} starts accepted; letting runs end"
        )
        for role in roles:
            if role.process is None or role.process.poll() is not None:
                role.start()
        report = settle_and_check(tag, tally, args.settle, returned)
    finally:
        for role in roles:
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
    return 0


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


def settle_and_check(tag: str, tally: Tally, settle: float, returned: dict[str, float]) -> dict[str, Any]:
    from django.db import close_old_connections, connection

    close_old_connections()
    prefix = f"chaos-{tag}-%"
    deadline = time.monotonic() + settle
    while True:
        with connection.cursor() as cur:
            cur.execute(
                "SELECT count(*) FILTER (WHERE status NOT IN ('succeeded', 'failed', 'cancelled')) FROM workflows_run WHERE idempotency_key LIKE %s",
                [prefix],
            )
            open_runs = cur.fetchone()[0]
        if open_runs == 0 or time.monotonic() > deadline:
            break
        time.sleep(1)
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
        recovery = {}
        for what, at in returned.items():
            cur.execute(
                "SELECT extract(epoch FROM min(finished_at)) FROM workflows_noderun WHERE finished_at > to_timestamp(%s)",
                [at],
            )
            first = cur.fetchone()[0]
            recovery[what] = None if first is None else round((float(first) - at) * 1000)
    lost = [k for k in tally.started if k not in by_key]
    doubled = [k for k, (n, *_rest) in by_key.items() if n > 1]
    stuck = [k for k, (_n, _id, lo, hi) in by_key.items() if lo not in TERMINAL or hi not in TERMINAL]
    not_succeeded = [k for k, (_n, _id, lo, hi) in by_key.items() if (lo, hi) != ("succeeded", "succeeded")]
    return {
        "starts_accepted": len(tally.started),
        "runs_in_postgres": len(by_key),
        "answers": dict(sorted(tally.statuses.items())),
        "recovery_ms_from_store_return_to_first_node_finished": recovery,
        "violations": {
            "lost": lost[:20],
            "doubled": doubled[:20],
            "stuck": stuck[:20],
            "not_succeeded": not_succeeded[:20],
            "attempt_recorded_twice": attempts_twice,
            "node_succeeded_twice": succeeded_twice,
            "wrong_output": wrong_output,
            "start_answered_5xx": tally.server_errors[:20],
            "gave_up_starting": tally.gave_up[:20],
        },
    }


if __name__ == "__main__":
    sys.exit(main())
