from __future__ import annotations

import atexit
import contextlib
import importlib.util
import logging
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import django
import pytest

# ============================================================================================
# Embedded servers for the test session (owned by scripts/services.py; fixtures go below).
#
# Unless DATABASE_URL and REDIS_URL are both set, importing this conftest starts PostgreSQL
# and Valkey from the wheels in .data/test (no durability, fast) and exports their URLs, so
# that the Django settings and every subprocess a test starts (workers, schedulers) see them.
# pytest-django then creates `test_switchyard` on that server as usual. The last session
# using the servers stops them; pytest-xdist workers inherit the URLs and start nothing.
#
# Why at import, and why DJANGO_SETTINGS_MODULE is set here rather than in pyproject.toml:
# pytest-django imports the settings named there before any conftest runs (before the URLs
# exist), and the conftests below this one import models, so Django must be set up by the
# time they load, which is before any pytest_configure hook.
# ============================================================================================

REPO = Path(__file__).resolve().parent.parent
TEST_SERVICES_DIR = REPO / ".data" / "test"


def _load_services():  # scripts/ is not a package; load the module by its path
    spec = importlib.util.spec_from_file_location("switchyard_services", REPO / "scripts" / "services.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


services = _load_services()
services.log.setLevel(logging.WARNING)  # "started"/"stopped" lines are noise in a test report
_services_lease = contextlib.ExitStack()
# Closed by pytest_unconfigure; atexit covers a session that fails before configuring.
atexit.register(_services_lease.close)
if not (os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL")):
    # Shared: another session running in this checkout keeps them up until it ends too.
    os.environ.update(_services_lease.enter_context(services.shared(TEST_SERVICES_DIR, ephemeral=True)))
# Under pytest-xdist (`make test` runs two workers), each worker gets a Redis database of its
# own (gw0 -> 1, gw1 -> 2, ...); pytest-django gives each its own PostgreSQL database
# (test_switchyard_gw0, ...). The subprocesses a test starts inherit both.
# A session started with SWITCHYARD_TEST_SESSION=<name> (`make test` runs the browser tests
# so, beside the xdist session) gets the last Redis database (15) and test_switchyard_<name>;
# one such session at a time, and not under xdist.
SIDE_SESSION = os.environ.get("SWITCHYARD_TEST_SESSION", "")
SIDE_SESSION_REDIS_DB = 15  # Valkey's default 16 databases: far from gw0, gw1, ...
redis_db = None
if (xdist_worker := os.environ.get("PYTEST_XDIST_WORKER", "")).startswith("gw"):
    redis_db = int(xdist_worker[2:]) + 1
elif SIDE_SESSION:
    redis_db = SIDE_SESSION_REDIS_DB
if redis_db is not None:
    os.environ["REDIS_URL"] = urlunsplit(urlsplit(os.environ["REDIS_URL"])._replace(path=f"/{redis_db}"))
if SIDE_SESSION and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    # Started in the background by a shell (`make test`), it inherited SIGINT ignored: take
    # it back, so that Ctrl-C stops it (its fixtures stopping their processes) with the other.
    signal.signal(signal.SIGINT, signal.default_int_handler)
# The egress policy refuses loopback. The project's own fake servers (HTTP targets, webhook
# receivers, LLM providers) listen on 127.0.0.1, so the session allows that one address, in
# the environment so that workers and schedulers the tests start allow it too. Tests of the
# refusals take it back with the `default_egress` fixture (or SWITCHYARD_EGRESS_ALLOW="").
TEST_EGRESS_ALLOW = "127.0.0.1"
os.environ["SWITCHYARD_EGRESS_ALLOW"] = TEST_EGRESS_ALLOW
# The tests' own key that seals secrets (a fixed Fernet key; workers the tests start inherit it).
os.environ["SWITCHYARD_SECRETS_KEY"] = "dGVzdC1rZXktdGhhdC1zZWFscy1zZWNyZXRzLTMyYiE="
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
django.setup()
# Not inherited: pytest-django in a pytest-xdist worker would import the settings before this
# file could give the worker its own REDIS_URL (above). pytest-django reads
# `settings.configured` when the variable is absent; manage.py and asgi.py set their own.
del os.environ["DJANGO_SETTINGS_MODULE"]


def pytest_unconfigure(config: pytest.Config) -> None:
    _services_lease.close()


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    """A side session's test database is test_switchyard_<name> (see SWITCHYARD_TEST_SESSION)."""
    if SIDE_SESSION and not xdist_worker:
        from django.conf import settings

        for db in settings.DATABASES.values():
            db.setdefault("TEST", {})
            db["TEST"]["NAME"] = f"{db['TEST'].get('NAME') or 'test_' + db['NAME']}_{SIDE_SESSION}"


# ============================================================================================
# End of the embedded-servers section.
# ============================================================================================


@pytest.fixture
def lone_starts(settings) -> None:
    """Every start of this test comes alone: its roots go straight to the workers (runs.StartPacing)."""
    settings.SWITCHYARD = {**settings.SWITCHYARD, "START_BURST_GAP_SECONDS": 0.0}


@pytest.fixture
def default_egress(settings) -> None:
    """The egress policy as shipped, nothing allow-listed (the session allows 127.0.0.1)."""
    settings.SWITCHYARD = {**settings.SWITCHYARD, "EGRESS_ALLOW": []}


@pytest.fixture(autouse=True)
def fresh_budgets() -> Iterator[None]:
    """Each test reads the budgets afresh: a test's database is rolled back after it (no
    signal replaces the budgets' epoch), but what this process remembers under the epoch
    (budgets/ledger.py ALL_BUDGETS, read by calls and starts) would outlive it."""
    from workflows.budgets import ledger

    ledger.EPOCH.forget()
    yield
    ledger.EPOCH.forget()


# The longest files, longest first (their times under --durations on 2 cores, 2026-11-27;
# each over 50 s). `make test` runs --dist loadfile --no-loadscope-reorder, so pytest-xdist
# hands out files in this order: the long ones start first and the many short ones fill in
# at the end. In xdist's own order (most tests first) the long files with few tests (chaos:
# 2 tests, minutes) came last, and one worker sat idle while the other ran them. Other files
# keep their collection order after these; a file missing here only starts later than it could.
LONGEST_FILES_FIRST = [
    "tests/integration/test_runtime.py",
    "tests/integration/test_chaos.py",
    "tests/integration/test_waits.py",
    "tests/integration/test_llm_streaming.py",
    "tests/integration/test_slots.py",
    "tests/integration/test_mcp_server.py",
    "tests/integration/test_maps.py",
    "tests/integration/test_schedules.py",
    "tests/integration/test_children.py",
    "tests/integration/test_sagas.py",
    "tests/integration/test_supervisor.py",
    "tests/integration/test_budgets.py",
    "tests/integration/test_mcp_agent.py",
    "tests/integration/test_suites.py",
    "tests/integration/test_provider_health.py",
    "tests/integration/test_unfixable_failures.py",
    "tests/integration/test_agent_workflow_tools.py",
    "tests/integration/test_agent.py",
    "tests/integration/test_agent_streaming.py",
    "tests/integration/test_backup.py",
    "tests/integration/test_price_migration.py",
    "tests/integration/test_replays.py",
    "tests/integration/test_anthropic_agent.py",
    "tests/integration/test_waiting_runs.py",
    "tests/api/test_schemathesis.py",
    "tests/integration/test_cross_host.py",
    "tests/api/test_declared_headers.py",
    "tests/api/test_topics.py",
    "tests/integration/test_response_cache.py",
    "tests/integration/test_flow_control_runtime.py",
    "tests/integration/test_priorities.py",
    "tests/unit/test_layers.py",
]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {REPO / path: place for place, path in enumerate(LONGEST_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(Path(str(item.path)), len(rank)))
