"""The LLM page and the usage card through Django's test client: roles, usage with and without prices."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.test import Client

from tests.integration.conftest import publish
from workflows.llm import usage
from workflows.llm.client import Completion
from workflows.llm.providers import Endpoint
from workflows.runs import actions as runs
from workflows.store.models import LLMPrice, NodeRun

pytestmark = pytest.mark.django_db
KEY = "sk-page-secret-777"


def signed_in(person: Any, role: str) -> Client:
    client = Client()
    client.force_login(person(role))
    return client


def one_call(model: str = "tiny-1") -> int:
    workflow = publish("asker", {"nodes": [{"id": "ask", "handler": "core.noop"}], "edges": []})
    run, _ = runs.start_run(workflow, {})
    node = NodeRun.objects.get(run=run)
    endpoint = Endpoint("acme", "http://x.test/v1", KEY, model, 10, False)
    done = Completion("hi", [], "stop", model, 1000, 2000, 12.5)
    usage.record_call(node_run_id=node.pk, endpoint=endpoint, completion=done)
    return run.pk


def test_the_llm_page_shows_usage_and_never_the_key(person: Any) -> None:
    LLMPrice.objects.create(model="tiny-1", input_per_million=Decimal("1"), output_per_million=Decimal("2"))
    one_call()
    one_call("unpriced-1")
    page = signed_in(person, "admin").get("/llm/")
    assert page.status_code == 200
    html = page.content.decode()
    assert KEY not in html
    assert "0.0050" in html and "unknown" in html, "priced cost and unknown cost side by side"


@pytest.mark.parametrize("role", ["viewer", "operator", "editor"])
def test_only_admins_open_the_llm_page(person: Any, role: str) -> None:
    assert signed_in(person, role).get("/llm/").status_code == 403
    assert signed_in(person, role).post("/llm/providers/", {"name": "x"}).status_code == 403


def test_the_usage_card_says_unknown_for_unpriced_calls_and_never_zero(person: Any) -> None:
    one_call("unpriced-1")
    card = signed_in(person, "viewer").get("/llm/usage/").content.decode()
    assert 'data-llm="cost">unknown<' in card
    LLMPrice.objects.create(
        model="unpriced-1", input_per_million=Decimal("3"), output_per_million=Decimal("0")
    )
    one_call("unpriced-1")
    card = signed_in(person, "viewer").get("/llm/usage/").content.decode()
    assert 'data-llm="cost">0.0030 (+1 unpriced)<' in card


def test_the_run_resource_carries_its_llm_usage(api: Any) -> None:
    LLMPrice.objects.create(model="tiny-1", input_per_million=Decimal("1"), output_per_million=Decimal("2"))
    run_id = one_call()
    body = api.get(f"runs/{run_id}").json()
    expected = {"calls": 1, "input_tokens": 1000, "output_tokens": 2000, "cost": "0.005", "unpriced_calls": 0}
    assert body["llm_usage"] == expected
    assert body["nodes"][0]["llm_usage"] == expected
