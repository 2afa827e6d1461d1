"""Browser tests: Playwright driving Debian's Chromium against a real Daphne.

Fixtures for every browser test (the dashboard's and the editor's):
- `live_url`: a Daphne subprocess (one per session, on a free port) serving the test
  database; tests using it are transactional, since the server must see committed data;
- `runtime`: two RQ workers, one scheduler and the dashboard's broadcaster, as subprocesses;
- `users`: one user per role (viewer, operator, editor, admin) with the password PASSWORD;
- `page_as(role)`: a Playwright page of a fresh browser context, logged in as that role;
- `screenshot(page, name)`: a PNG in test-artifacts/screenshots/ (kept by CI), also taken
  of every open page when a test fails.

Chromium is Debian's (/usr/bin/chromium, installed by `make test`), never `playwright install`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.hashers import make_password
from django.contrib.auth.models import Group, User
from django.contrib.sessions.backends.db import SessionStore
from playwright.sync_api import Browser, Page, expect

from controlplane import access
from tests.browser.chromium import CHROMIUM, CHROMIUM_ARGS
from tests.integration.conftest import accepts, free_port
from tests.integration.runtime import ROOT, Runtime, wait_for
from workflows.runtime import bus

SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
PASSWORD = "switchyard-browser-test-1"
TIMEOUT_MS = 20_000

expect.set_options(timeout=TIMEOUT_MS)
BROWSER_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the browser tests last.

    Playwright's sync API keeps an event loop running in the main thread from its first use
    until the session ends; tests after it that use async_to_sync (consumer tests) would fail.
    """
    items.sort(key=lambda item: BROWSER_DIR in Path(str(item.path)).parents)


@pytest.fixture(scope="session", autouse=True)
def allow_orm_beside_playwright() -> Iterator[None]:
    """Let the tests' own (synchronous) ORM calls run beside Playwright's event loop.

    Django refuses ORM calls in a thread with a running event loop ("async unsafe"); here
    the loop is Playwright's, idle while the test's code runs.
    """
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    yield
    if previous is None:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    if not CHROMIUM.exists():
        pytest.fail("Chromium is missing: `apt-get install -y chromium` (make test does it).")
    return {
        **browser_type_launch_args,
        "executable_path": str(CHROMIUM),
        "headless": True,
        "args": CHROMIUM_ARGS,
    }


@pytest.fixture(scope="session")
def live_server_process(django_db_setup: Any) -> Iterator[str]:
    """Daphne on a free port, serving the test database, for the whole session."""
    port = free_port()
    web = Runtime()
    web.web("daphne", port)
    wait_for(lambda: accepts(port), 30, f"Daphne to listen on port {port}")
    yield f"http://127.0.0.1:{port}"
    web.stop()


@pytest.fixture
def live_url(live_server_process: str, transactional_db: None) -> str:
    """The live server's base URL (no trailing slash); the test's data is committed."""
    return live_server_process


@pytest.fixture
def runtime(transactional_db: None) -> Iterator[Runtime]:
    """Two RQ workers, one scheduler and the broadcaster, on an emptied Redis."""
    bus.client().flushdb()
    bus.ensure_group()
    rt = Runtime(SWITCHYARD_MONITOR_INTERVAL_SECONDS="0.2")
    rt.worker("worker-1")
    rt.worker("worker-2")
    rt.scheduler("scheduler-1")
    rt.broadcaster("broadcaster")
    yield rt
    rt.stop()


@pytest.fixture(scope="session")
def password_hash() -> str:
    return make_password(PASSWORD)  # once: hashing is slow on purpose


@pytest.fixture
def users(transactional_db: None, password_hash: str) -> dict[str, User]:
    """One user per role, named after it, each in the Django group of that role."""
    made = {}
    for role in access.ROLES:
        user = User.objects.create(username=role, password=password_hash, is_staff=role == access.ADMIN)
        user.groups.add(Group.objects.get_or_create(name=role)[0])
        made[role] = user
    return made


def session_of(user: User) -> str:
    """A saved session logged in as the user (what django.contrib.auth.login stores)."""
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = settings.AUTHENTICATION_BACKENDS[0]
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.save()
    assert session.session_key is not None
    return session.session_key


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.stash[FAILED] = report.failed
    return report


FAILED = pytest.StashKey[bool]()


@pytest.fixture
def screenshot(request: pytest.FixtureRequest) -> Callable[[Page, str], Path]:
    def take(page: Page, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{request.node.name}-{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


@pytest.fixture
def page_as(
    browser: Browser, live_url: str, users: dict[str, User], request: pytest.FixtureRequest, screenshot: Any
) -> Iterator[Callable[[str], Page]]:
    """Return a function giving a new page, on the overview, logged in as a role.

    The session is made here, as Django's test client's force_login does, rather than
    through the form: the form's deliberately slow password check ran in the one thread
    Daphne gives all sync code, once per page, and under a loaded CI machine a login once
    took longer than a navigation may. test_login.py drives the form itself.
    """
    contexts = []
    pages: list[Page] = []

    def login(role: str) -> Page:
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        page = context.new_page()
        pages.append(page)
        context.add_cookies(
            [{"name": settings.SESSION_COOKIE_NAME, "value": session_of(users[role]), "url": live_url}]
        )
        page.goto(f"{live_url}/")
        return page

    yield login
    if request.node.stash.get(FAILED, False):
        for n, page in enumerate(pages):
            if not page.is_closed():
                screenshot(page, f"failure-{n}")
    for context in contexts:
        context.close()
