"""A version's graph as Mermaid and DOT: the API operation and the pages' Export links."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from controlplane import access
from tests.api.conftest import assert_problem
from workflows.store.models import Workflow

pytestmark = pytest.mark.django_db


def test_the_api_answers_a_versions_graph_as_mermaid_or_dot(api_as: Any, chain: Workflow) -> None:
    viewer = api_as(access.VIEWER, "read")
    mermaid = viewer.get("workflows/chain/versions/1/graph")
    assert mermaid.status_code == 200 and mermaid["Content-Type"] == "text/plain; charset=utf-8"
    text = mermaid.content.decode()
    assert text.startswith("%% chain v1\nflowchart TD\n") and "n0 --> n1" in text
    dot = viewer.get("workflows/chain/versions/1/graph", format="dot").content.decode()
    assert dot.startswith('digraph "chain v1" {') and '"first" -> "second";' in dot


def test_a_bad_format_or_a_missing_version_is_a_4xx_naming_it(api: Any, chain: Workflow) -> None:
    assert_problem(api.get("workflows/chain/versions/1/graph", format="png"), 400, "format")
    body = assert_problem(api.get("workflows/chain/versions/9/graph"), 404)
    assert "no version 9" in body["detail"]


def test_the_pages_offer_the_export_and_download_it(person: Any, chain: Workflow) -> None:
    client = Client()
    client.force_login(person(access.VIEWER))
    live = client.get("/workflows/chain/live/").content.decode()
    assert 'data-export="v1"' in live and "/workflows/chain/versions/1/graph.mmd" in live
    history = client.get("/workflows/chain/history/").content.decode()
    assert "/workflows/chain/versions/1/graph.dot" in history
    download = client.get("/workflows/chain/versions/1/graph.dot")
    assert download.status_code == 200
    assert download["Content-Disposition"] == 'attachment; filename="chain-v1.dot"'
    assert download.content.decode().startswith('digraph "chain v1" {')
    assert client.get("/workflows/chain/versions/1/graph.png").status_code == 404
    assert Client().get("/workflows/chain/versions/1/graph.mmd").status_code == 302  # sign in first
