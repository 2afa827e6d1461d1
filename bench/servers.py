"""The servers a side benchmark measures against: embedded ones of its own, or the ones
DATABASE_URL and REDIS_URL name; in either case a database and a Redis db of its own."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

# The benches' fake LLM providers and HTTP targets listen on 127.0.0.1, which the egress
# policy refuses (docs/admins/egress.md): allow that address, for the processes started too.
os.environ.setdefault("SWITCHYARD_EGRESS_ALLOW", "127.0.0.1")

REPO = Path(__file__).resolve().parent.parent


def service_urls(data: Path, db_name: str, redis_db: int) -> tuple[str, str]:
    """Return (database URL, Redis URL), starting the embedded servers in `data` if needed."""
    if os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL"):
        db, redis_url = os.environ["DATABASE_URL"], os.environ["REDIS_URL"]
    else:
        spec = importlib.util.spec_from_file_location("services", REPO / "scripts" / "services.py")
        assert spec and spec.loader
        services = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(services)
        urls = services.up(data)
        db, redis_url = urls["DATABASE_URL"], urls["REDIS_URL"]
    return (
        urlunsplit(urlsplit(db)._replace(path=f"/{db_name}")),
        urlunsplit(urlsplit(redis_url)._replace(path=f"/{redis_db}")),
    )


def recreate_database(url: str) -> None:
    """Drop and create the database `url` names."""
    import psycopg

    name = urlsplit(url).path.lstrip("/")
    admin = urlunsplit(urlsplit(url)._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")


def fresh_django(data: Path, db_name: str, redis_db: int) -> dict[str, str]:
    """Point this process at a freshly created, migrated database and set Django up; return the env."""
    import subprocess

    db_url, redis_url = service_urls(data, db_name, redis_db)
    recreate_database(db_url)
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "REDIS_URL": redis_url,
        "DJANGO_SETTINGS_MODULE": "controlplane.settings",
    }
    os.environ.update(env)
    python = str(REPO / ".venv" / "bin" / "python")
    subprocess.run([python, "manage.py", "migrate", "-v", "0"], cwd=REPO, env=env, check=True)
    import django

    django.setup()
    return env
