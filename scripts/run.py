#!/usr/bin/env python3
"""Run Switchyard for development: servers, migrations, web server, scheduler and workers.

`make run` calls this. It starts the embedded PostgreSQL and Valkey (unless DATABASE_URL and
REDIS_URL are both set), migrates, bootstraps the admin login and demo workflows, then keeps
Daphne, the scheduler, the dashboard's broadcaster and the workers running. A child that dies
is restarted, always: after 1 s, doubling with each crash that follows closely on the last one
and capped at RESTART_DELAY_MAX_SECONDS, back to 1 s once a child has stayed up for
STABLE_SECONDS; a role is never given up on. Each child's state (running since, restarting in,
crashes) is printed when it changes and kept in .data/dev/supervisor.json (`make status`
shows it). Ctrl-C or SIGTERM stops everything it started, within STOP_GRACE_SECONDS.

`scripts/run.py restart` (`make restart`) restarts the children one at a time, as a deploy
does, while the supervisor keeps running: each worker, the scheduler and the broadcaster is
sent SIGTERM (a worker drains, within SWITCHYARD_WORKER_DRAIN_SECONDS) and started again once
it has exited; the web server is started anew first and the old one stopped once the new one
listens. Both accept on one listening socket that the supervisor holds and hands to each
Daphne (`--fd`), so a client never finds the port closed.

Without LLM_BASE_URL it also runs the scripted demo LLM provider (workflows/llm/demo_server.py,
on DEMO_LLM_PORT or a free port), which bootstrap registers as the provider "demo", so the
demo workflows' LLM nodes answer on a machine with no network and no key.

It also generates the key that seals secrets into .data/dev/secrets.key (mode 0600) unless
SWITCHYARD_SECRETS_KEY is set, and hands it to every child.

Environment: PORT (web server, default 8000), WORKERS (RQ workers, default 2), DEMO_LLM_PORT,
and anything the settings read. Variables from a `.env` file in the checkout apply unless already set.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VENV_PYTHON = REPO / ".venv" / "bin" / "python"
if __name__ == "__main__" and importlib.util.find_spec("psutil") is None:  # not the project's Python
    if not VENV_PYTHON.exists():
        sys.exit("No virtualenv in .venv: run `make run`, which creates it first.")
    os.execv(VENV_PYTHON, [str(VENV_PYTHON), *sys.argv])

import psutil  # noqa: E402

sys.path.insert(0, str(REPO / "scripts"))
import services  # noqa: E402

DATA_DIR = REPO / ".data" / "dev"
BIN = Path(sys.executable).parent  # the virtualenv's bin folder (make runs .venv/bin/python)
HOST = "127.0.0.1"
STOP_GRACE_SECONDS = 10.0
RESTART_DELAY_SECONDS = 1.0
RESTART_DELAY_MAX_SECONDS = float(os.environ.get("SWITCHYARD_RESTART_DELAY_MAX_SECONDS") or 16)
STABLE_SECONDS = 30.0
STATE_FILE = Path(os.environ.get("SWITCHYARD_RUN_STATE_FILE") or DATA_DIR / "supervisor.json")
READY_TIMEOUT_SECONDS = 120.0
ROLL_STOP_SECONDS = 30.0  # a restarted child still running after this is killed
ROLL_SETTLE_SECONDS = 2.0  # after starting a worker or scheduler anew: Django's import, a first claim
LISTENING = "Listening on TCP address"  # Daphne's line once it accepts on the handed socket
# Lines of `manage.py bootstrap` repeated under the banner, so the login is not scrolled away.
LOGIN_LINE = re.compile(r"login|password|username", re.IGNORECASE)

_output_lock = threading.Lock()
_signals_received = 0
_restarts_requested = 0  # SIGUSR1: `run.py restart`


def say(name: str, line: str) -> None:
    """Print one line to the terminal, prefixed with the name of the process it comes from."""
    with _output_lock, contextlib.suppress(OSError):  # a closed terminal must not stop the relays
        sys.stdout.write(f"[{name}] {line}\n")
        sys.stdout.flush()


@dataclass
class Child:
    """A long-running process, restarted whenever it dies on its own (capped backoff, no give-up)."""

    name: str
    argv: Callable[[], list[str]]  # called at each start: workers need a fresh name
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    restart_at: float | None = None
    delay: float = RESTART_DELAY_SECONDS  # the wait before the next restart, if it crashes now
    crashes: int = 0
    last_exit: str = ""
    pass_fds: tuple[int, ...] = ()  # the web server's listening socket
    rolling: bool = False  # a rolling restart owns the process: check() leaves it alone
    ready: threading.Event | None = None  # set when the process says LISTENING

    def start(self) -> None:
        self.ready = threading.Event()
        self.process = spawn(self.name, self.argv(), self.env, self.pass_fds, self.ready)
        self.started_at = time.monotonic()
        self.restart_at = None

    def check(self, now: float) -> bool:
        """Restart the process if it died, after its backoff; return True if its state changed."""
        if self.rolling:
            return False
        if self.restart_at is not None:
            if now < self.restart_at:
                return False
            self.start()
            return True
        if self.process is None or self.process.poll() is None:
            return False
        self.last_exit = describe_exit(self.process.returncode)
        kill_group(self.process.pid, signal.SIGKILL)  # its children (an RQ work horse) go too
        self.crashes += 1
        if now - self.started_at >= STABLE_SECONDS:
            self.delay = RESTART_DELAY_SECONDS  # it had been fine for a while: a fresh crash
        say("run", f"{self.name} exited with {self.last_exit}; restarting in {self.delay:g} s")
        self.restart_at = now + self.delay
        self.delay = min(self.delay * 2, RESTART_DELAY_MAX_SECONDS)
        return True

    def state(self, now: float) -> dict[str, object]:
        """What `make status` shows of this child."""
        running = self.process is not None and self.restart_at is None
        state: dict[str, object] = {"name": self.name, "crashes": self.crashes, "last_exit": self.last_exit}
        if running and self.process is not None:
            state |= {
                "state": "running",
                "pid": self.process.pid,
                "up_seconds": round(now - self.started_at, 1),
            }
        elif self.restart_at is not None:
            state |= {"state": "restarting", "restart_in_seconds": round(max(self.restart_at - now, 0), 1)}
        else:
            state |= {"state": "not started"}
        return state

    def stop(self, sig: signal.Signals) -> None:
        if self.process is not None:
            kill_group(self.process.pid, sig)

    def is_stopped(self) -> bool:
        return self.process is None or (
            self.process.poll() is not None and not group_members(self.process.pid)
        )


@dataclass
class Rolls:
    """The rolling restarts asked for (SIGUSR1) and done, as `run.py restart` reads them."""

    done: int = 0
    thread: threading.Thread | None = None
    current: str = ""


def write_state(children: list[Child], now: float, rolls: Rolls | None = None) -> None:
    """Keep each child's state in STATE_FILE (replaced whole, so a reader never sees half)."""
    states = {
        "pid": os.getpid(),
        "updated": time.time(),
        "children": [c.state(now) for c in children],
        "restarts_done": rolls.done if rolls else 0,
        "restarting": rolls.current if rolls else "",
    }
    with contextlib.suppress(OSError):
        STATE_FILE.parent.mkdir(parents=True, exist_ok=True)
        partial = STATE_FILE.with_suffix(".json.partial")
        partial.write_text(json.dumps(states, indent=2) + "\n")
        partial.replace(STATE_FILE)


def spawn(
    name: str,
    argv: list[str],
    env: dict[str, str],
    pass_fds: tuple[int, ...] = (),
    ready: threading.Event | None = None,
) -> subprocess.Popen[bytes]:
    """Start ARGV in its own process group with its output relayed to the terminal."""
    # Its own group: Ctrl-C reaches only this supervisor, which then stops the children in
    # order; and killing the group also ends the processes a child forked.
    process = subprocess.Popen(
        argv, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, process_group=0, pass_fds=pass_fds,
    )  # fmt: skip
    threading.Thread(target=relay, args=(name, process, None, ready), daemon=True).start()
    return process


def relay(
    name: str,
    process: subprocess.Popen[bytes],
    lines: list[str] | None = None,
    ready: threading.Event | None = None,
) -> None:
    assert process.stdout is not None
    for raw in iter(process.stdout.readline, b""):
        line = raw.decode(errors="replace").rstrip("\r\n")
        say(name, line)
        if lines is not None:
            lines.append(line)
        if ready is not None and LISTENING in line:
            ready.set()


def roll(children: list[Child], rolls: Rolls) -> None:
    """Restart every child one at a time: workers first, the web server last."""
    for child in sorted(children, key=lambda c: c.name == "web"):
        if _signals_received:
            return
        rolls.current = child.name
        began = time.monotonic()
        child.rolling = True
        try:
            how = replace_web(child) if child.name == "web" else restart_child(child)
        finally:
            child.rolling = False
        say("run", f"restarted {child.name} ({how}, {time.monotonic() - began:.1f} s)")
    rolls.current = ""
    rolls.done += 1
    say("run", "rolling restart done")


def restart_child(child: Child) -> str:
    """SIGTERM, wait for the child to exit (a worker drains), start it again."""
    child.stop(signal.SIGTERM)
    deadline = time.monotonic() + ROLL_STOP_SECONDS
    while not child.is_stopped() and time.monotonic() < deadline:
        time.sleep(0.1)
    how = "stopped"
    if not child.is_stopped():
        child.stop(signal.SIGKILL)
        how = f"killed after {ROLL_STOP_SECONDS:g} s"
    if child.process is not None:
        child.process.wait()
    child.start()
    time.sleep(ROLL_SETTLE_SECONDS)
    return how


def replace_web(child: Child) -> str:
    """Start a second web server on the same socket, then stop the old one: no gap."""
    old = child.process
    child.start()
    assert child.ready is not None
    if not child.ready.wait(READY_TIMEOUT_SECONDS):
        return "the new web server never listened; the old one keeps serving"
    if old is not None:
        kill_group(old.pid, signal.SIGTERM)
        try:
            old.wait(ROLL_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            kill_group(old.pid, signal.SIGKILL)
            old.wait()
            return "new one listening; old one killed"
    return "new one listening; old one stopped"


def kill_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def group_members(pgid: int) -> list[int]:
    """Return the live (not zombie) processes of a process group."""
    members = []
    for proc in psutil.process_iter(["status"]):
        with contextlib.suppress(psutil.Error, ProcessLookupError):
            if proc.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(proc.pid) == pgid:
                members.append(proc.pid)
    return members


def describe_exit(code: int) -> str:
    if code < 0:
        return f"signal {signal.Signals(-code).name}"
    return f"code {code}"


def run_once(name: str, argv: list[str], env: dict[str, str]) -> tuple[int, list[str]]:
    """Run a command to completion (stopping it early on Ctrl-C); return its code and output."""
    lines: list[str] = []
    process = subprocess.Popen(
        argv, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, process_group=0,
    )  # fmt: skip
    reader = threading.Thread(target=relay, args=(name, process, lines), daemon=True)
    reader.start()
    while process.poll() is None:
        if _signals_received:
            kill_group(process.pid, signal.SIGTERM)
            try:
                process.wait(STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                kill_group(process.pid, signal.SIGKILL)
                process.wait()
        time.sleep(0.05)
    reader.join(timeout=2)
    return process.returncode, lines


def stop_all(children: list[Child]) -> None:
    """SIGTERM every child's group, wait up to STOP_GRACE_SECONDS, then SIGKILL what is left."""
    if children:
        say("run", "stopping (Ctrl-C again to kill at once)")
    for child in children:
        child.stop(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    while not all(child.is_stopped() for child in children):
        if time.monotonic() > deadline or _signals_received > 1:  # a second Ctrl-C: no waiting
            why = "did not stop in time" if _signals_received < 2 else "asked again to stop"
            for child in children:
                if not child.is_stopped():
                    say("run", f"{child.name} {why}; killing it")
                    child.stop(signal.SIGKILL)
            break
        time.sleep(0.1)
    for child in children:
        if child.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.process.wait(5)


def load_dotenv(path: Path) -> None:
    """Apply KEY=VALUE lines of PATH to the environment, without overriding what is set."""
    if not path.is_file():
        return
    for line in path.read_text().splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key and not key.startswith("#"):
            os.environ.setdefault(key.removeprefix("export ").strip(), value.strip().strip("'\""))


def secrets_key(data_dir: Path) -> str:
    """The key that seals secrets: SWITCHYARD_SECRETS_KEY if set, else the one in the data folder,
    generated there (owner-only: 0600, written through a file created with that mode) if absent."""
    if os.environ.get("SWITCHYARD_SECRETS_KEY"):
        return os.environ["SWITCHYARD_SECRETS_KEY"]
    path = data_dir / "secrets.key"
    if not path.exists():
        from cryptography.fernet import Fernet

        data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(Fernet.generate_key().decode() + "\n")
        say("run", f"generated the secrets key in {path} (keep it with the backups, apart from them)")
    return path.read_text().strip()


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "")
    try:
        return int(raw) if raw else default
    except ValueError:
        sys.exit(f"{name} must be an integer, got {raw!r}.")


def demo_llm_port() -> int | None:
    """The demo provider's port, or None when LLM_BASE_URL names a real provider."""
    if os.environ.get("LLM_BASE_URL"):
        return None
    wanted = env_int("DEMO_LLM_PORT", 0)
    if wanted:
        return wanted
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def long_running(env: dict[str, str], listener: socket.socket, workers: int) -> list[Child]:
    python = str(BIN / "python")
    queues = [q for q in os.environ.get("SWITCHYARD_QUEUES", "default,agents").split(",") if q]
    host = socket.gethostname()

    def worker_argv(number: int) -> Callable[[], list[str]]:
        # RQ refuses a name a dead worker still holds in Redis, so each start gets a new one.
        return lambda: [
            python, "manage.py", "rqworker", "-v", "0", "--worker-class", "workflows.runtime.worker.NodeWorker",
            "--name", f"{host}-worker-{number}-{uuid.uuid4().hex[:8]}", *queues,
        ]  # fmt: skip

    fd = listener.fileno()
    daphne = [python, "-m", "controlplane.webserver", "--fd", str(fd), "controlplane.asgi:application"]
    children = [
        Child("web", lambda: daphne, env, pass_fds=(fd,)),
        Child("scheduler", lambda: [python, "manage.py", "runscheduler"], env),
        Child("broadcaster", lambda: [python, "manage.py", "runbroadcaster"], env),
    ]
    children += [Child(f"worker-{n}", worker_argv(n), env) for n in range(1, workers + 1)]
    return children


def supervise(children: list[Child], port: int, login_lines: list[str]) -> None:
    """Keep the children running until a signal arrives; announce the URL once Daphne answers."""
    for child in children:
        child.start()
    announce_by: float | None = time.monotonic() + READY_TIMEOUT_SECONDS  # None once announced
    last_written = 0.0
    rolls = Rolls()
    while not _signals_received:
        now = time.monotonic()
        changed = [child.check(now) for child in children]
        if _restarts_requested > rolls.done and (rolls.thread is None or not rolls.thread.is_alive()):
            rolls.thread = threading.Thread(target=roll, args=(children, rolls), daemon=True)
            rolls.thread.start()
            changed.append(True)
        if any(changed) or now - last_written > 1:
            write_state(children, now, rolls)
            last_written = now
        if announce_by is not None and services.accepts(port):
            with _output_lock:
                print(f"\nSwitchyard is running at http://{HOST}:{port}/", *login_lines, sep="\n  ")
                print("Press Ctrl-C to stop.\n", flush=True)
            announce_by = None
        elif announce_by is not None and now > announce_by:
            say("run", f"the web server does not answer on port {port} yet; see its output above")
            announce_by = now + READY_TIMEOUT_SECONDS
        time.sleep(0.2)


def on_restart(_signum: int, _frame: object) -> None:
    global _restarts_requested
    _restarts_requested += 1


def request_restart(timeout: float = 600.0) -> int:
    """`make restart`: ask the supervisor of `make run` for a rolling restart; wait until done."""
    try:
        states = json.loads(STATE_FILE.read_text())
    except (OSError, ValueError):
        print("Switchyard is not running here (no .data/dev/supervisor.json).")
        return 1
    done = states.get("restarts_done", 0)
    os.kill(states["pid"], signal.SIGUSR1)
    print(f"asked the supervisor (pid {states['pid']}) to restart its processes one at a time")
    deadline = time.monotonic() + timeout
    shown = ""
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            states = json.loads(STATE_FILE.read_text())
        if states.get("restarts_done", 0) > done:
            print("every process restarted")
            return 0
        if states.get("restarting") and states["restarting"] != shown:
            shown = states["restarting"]
            print(f"  restarting {shown}")
        if not psutil.pid_exists(states["pid"]):
            print("the supervisor is gone")
            return 1
        time.sleep(0.2)
    print(f"the restart did not finish within {timeout:g} s; `make status` shows where it is")
    return 1


def on_signal(_signum: int, _frame: object) -> None:
    # Only count: printing here could re-enter a write the main thread was in the middle of.
    global _signals_received
    _signals_received += 1


class SayHandler(logging.Handler):
    """Show the services module's log lines like a child's output."""

    def emit(self, record: logging.LogRecord) -> None:
        say("services", record.getMessage())


def show_status() -> int:
    """`make status`: print what the supervisor of `make run` last wrote about its children."""
    try:
        states = json.loads(STATE_FILE.read_text())
    except (OSError, ValueError):
        print("Switchyard is not running here (no .data/dev/supervisor.json).")
        return 1
    if not psutil.pid_exists(states["pid"]):
        print(f"Switchyard is not running (its supervisor, pid {states['pid']}, is gone).")
        return 1
    age = time.time() - states["updated"]
    print(f"supervisor pid {states['pid']}, state written {age:.0f} s ago")
    for child in states["children"]:
        detail = {
            "running": f"pid {child.get('pid')}, up {child.get('up_seconds', 0):.0f} s",
            "restarting": f"restarting in {child.get('restart_in_seconds', 0):g} s",
        }.get(child["state"], child["state"])
        crashes = f", {child['crashes']} crashes (last: {child['last_exit']})" if child["crashes"] else ""
        print(f"  {child['name']:<12} {child['state']:<11} {detail}{crashes}")
    return 0


def main() -> int:
    if sys.argv[1:] == ["status"]:
        return show_status()
    if sys.argv[1:] == ["restart"]:
        return request_restart()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    signal.signal(signal.SIGUSR1, on_restart)
    services.log.addHandler(SayHandler())
    services.log.setLevel(logging.INFO)
    load_dotenv(REPO / ".env")
    port = env_int("PORT", 8000)
    workers = env_int("WORKERS", 2)
    if not services.port_is_free(port):
        print(f"Port {port} is already in use (another Switchyard?). Run with PORT=<free port>.")
        return 1
    given = [name for name in ("DATABASE_URL", "REDIS_URL") if os.environ.get(name)]
    started_services = False
    if len(given) == 2:
        say("run", "using DATABASE_URL and REDIS_URL from the environment")
        urls = {name: os.environ[name] for name in given}
    else:
        if given:
            say("run", f"only {given[0]} is set; both are needed to skip the embedded servers")
        started_services = not services.is_up(DATA_DIR)
        try:
            urls = services.up(DATA_DIR)
        except services.ServiceError as error:
            print(f"Could not start the embedded servers: {error}", file=sys.stderr)
            if started_services:
                services.down(DATA_DIR)
            return 1
        say("run", f"PostgreSQL and Valkey are up ({', '.join(urls.values())})")
    env = {**os.environ, **urls, "DJANGO_SETTINGS_MODULE": "controlplane.settings", "PYTHONUNBUFFERED": "1"}
    env["SWITCHYARD_SECRETS_KEY"] = secrets_key(DATA_DIR)
    demo_port = demo_llm_port()
    if demo_port is not None:
        env["SWITCHYARD_DEMO_LLM_URL"] = f"http://{HOST}:{demo_port}/v1"
        env["DEMO_LLM_PORT"] = str(demo_port)
        # The demo provider is on loopback, which the egress policy refuses: allow its port only.
        allowed = [e for e in env.get("SWITCHYARD_EGRESS_ALLOW", "").split(",") if e.strip()]
        env["SWITCHYARD_EGRESS_ALLOW"] = ",".join([*allowed, f"{HOST}:{demo_port}"])
        say("run", f"no LLM_BASE_URL: the scripted demo LLM provider serves on port {demo_port}")
    children: list[Child] = []
    try:
        return run(env, port, workers, children)
    finally:
        stop_all(children)
        STATE_FILE.unlink(missing_ok=True)
        if started_services:
            services.down(DATA_DIR)
        say("run", "stopped")


def run(env: dict[str, str], port: int, workers: int, children: list[Child]) -> int:
    python = str(BIN / "python")
    login_lines: list[str] = []
    for name, argv in [
        ("migrate", [python, "manage.py", "migrate", "--noinput"]),
        ("bootstrap", [python, "manage.py", "bootstrap"]),
    ]:
        if _signals_received:
            return 0
        code, lines = run_once(name, argv, env)
        if _signals_received:
            return 0
        if code != 0:
            say("run", f"{name} failed with {describe_exit(code)}; see its output above")
            return 1
        if name == "bootstrap":
            login_lines = [line.strip() for line in lines if LOGIN_LINE.search(line)] or [
                "Admin login: its password was shown by the first `make run`; to set a new one:",
                f"  {os.path.relpath(python, REPO)} manage.py changepassword admin",
            ]
    # The supervisor holds the web server's socket: a new Daphne accepts on it before the old
    # one stops (a rolling restart), and connections wait in its backlog while none does.
    listener = socket.create_server((HOST, port), backlog=1024)
    children.extend(long_running(env, listener, workers))
    if "SWITCHYARD_DEMO_LLM_URL" in env:
        demo = [python, "-m", "workflows.llm.demo_server", "--port", env["DEMO_LLM_PORT"]]
        children.append(Child("demo-llm", lambda: demo, env))
    supervise(children, port, login_lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
