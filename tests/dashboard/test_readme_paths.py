"""Every page path the README and the manual (docs/) name answers (not 404, not 500) for an admin.

The generated reference (docs/reference/, not in git) is left out: it is the API's own document.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import node, publish
from workflows.runs import actions as runs

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MANUAL = sorted(
    p for p in (ROOT / "docs").rglob("*.md") if "reference" not in p.relative_to(ROOT / "docs").parts
)
# Paths that only take a POST with a signature, a prefix or a suffix rather than a page, and
# readiness (503 without a scheduler and a worker, as it should). The MCP endpoint is an ASGI app
# beside Django (its tests run a live server); `/v1`, `/v1/messages` are a provider's own paths.
# The favicon's path redirects to a static file, which the ASGI app or a proxy serves, not Django's
# test client.
NOT_PAGES = {
    "/api/v1/hooks/<trigger>",
    "/api/v1",
    "/static/",
    "/pause",
    "/resume",
    "/run",
    "/mcp",
    "/v1",
    "/v1/messages",
    "/api/v1/health/ready",
    "/favicon.ico",
}


def named_paths(*files: Path) -> list[str]:
    found = {path for f in files for path in re.findall(r"`(/[^`\s]*)`", f.read_text())}
    # API templates (`/api/v1/schedules/{id}`) and alternatives (`/charts/<a|b>.json`) are no pages.
    return sorted(p for p in found - NOT_PAGES if "{" not in p and "|" not in p)


def test_the_readme_names_where_to_click_first() -> None:
    assert {"/accounts/login/", "/", "/runs/", "/inbox/", "/dead-letters/", "/workflows/"} <= set(
        named_paths(README)
    )


def test_the_readme_is_a_page_not_a_manual() -> None:
    lines = len(README.read_text().splitlines())
    assert lines < 150, f"README.md has {lines} lines: move the detail into docs/ and link to it"


def test_the_manual_names_the_pages() -> None:
    assert {"/runs/", "/dead-letters/", "/workflows/<slug>/live/", "/keys/", "/llm/"} <= set(
        named_paths(*MANUAL)
    )


@pytest.mark.parametrize("path", named_paths(README, *MANUAL))
def test_every_path_the_readme_and_manual_name_answers(path: str, client_as: Any, redis_clean: None) -> None:
    publish("readme", {"nodes": [node("a")]})
    workflow = publish("readme", {"nodes": [node("a"), node("b")]})  # v2: the diff's `to`
    run, _ = runs.start_run(workflow, {})
    path = path.replace("<slug>", workflow.slug).replace("<id>", str(run.pk))
    if path.startswith("/suite-runs/"):
        path = f"/suite-runs/{suite_run(workflow)}/"
    response = client_as("admin").get(path, follow=True)
    assert response.status_code == 200, f"{path} answered {response.status_code}"


def suite_run(workflow: Any) -> int:
    """A suite run of `workflow` (its one case a run of it), for the suite run's page."""
    from workflows.suites import building, running

    suite = building.create_suite(workflow, "readme", cases=[building.CaseIn({})])
    return running.start_suite_run(suite).pk
