"""Every page path the README names answers (not 404, not 500) for a logged-in admin."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import node, publish

pytestmark = pytest.mark.django_db
README = Path(__file__).resolve().parents[2] / "README.md"
# Paths that only take a POST with a signature, a prefix or a suffix rather than a page, and
# readiness (503 without a scheduler and a worker, as it should).
NOT_PAGES = {"/api/v1/hooks/<trigger>", "/api/v1", "/static/", "/pause", "/resume", "/api/v1/health/ready"}


def readme_paths() -> list[str]:
    found = set(re.findall(r"`(/[^`\s]*)`", README.read_text()))
    # API templates (`/api/v1/schedules/{id}`) and alternatives (`/charts/<a|b>.json`) are no pages.
    return sorted(p for p in found - NOT_PAGES if "{" not in p and "|" not in p)


def test_the_readme_names_the_pages() -> None:
    assert {"/runs/", "/dead-letters/", "/workflows/<slug>/live/"} <= set(readme_paths())


@pytest.mark.parametrize("path", readme_paths())
def test_every_path_the_readme_names_answers(path: str, client_as: Any, redis_clean: None) -> None:
    publish("readme", {"nodes": [node("a")]})
    workflow = publish("readme", {"nodes": [node("a"), node("b")]})  # v2: the diff's `to`
    response = client_as("admin").get(path.replace("<slug>", workflow.slug), follow=True)
    assert response.status_code == 200, f"{path} answered {response.status_code}"
