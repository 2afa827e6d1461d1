"""Spend budgets over the API: viewers read them, admins save them, bad fields are refused by
name, and a run whose workflow's budget is spent is refused at start (409 naming it)."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from controlplane import access
from tests.api.conftest import Api, assert_problem
from tests.integration.conftest import publish
from workflows.budgets import ledger
from workflows.core import budgets as core
from workflows.runtime import admission
from workflows.store.models import AuditEntry, Budget, BudgetLedger, Run, RunApiKey, Workflow

pytestmark = pytest.mark.django_db
DAILY = {"name": "daily", "unit": "cost", "amount": "2.50", "window": "day", "scope": "global"}


@pytest.fixture
def asker(db: Any) -> Workflow:
    return publish("asker", {"nodes": [{"id": "ask", "handler": "core.noop"}], "edges": []})


def test_an_admin_adds_a_budget_and_a_viewer_reads_its_figures(api: Api, api_as: Callable[..., Api]) -> None:
    made = api.post("budgets", DAILY)
    assert made.status_code == 201, made.content
    body = made.json()
    assert body["amount"] == "2.5" and body["spent"] == "0" and body["left"] == "2.5" and body["holds"] == []
    assert made["Location"] == f"/api/v1/budgets/{body['id']}"
    assert AuditEntry.objects.filter(action="budget.create").count() == 1

    listed = api_as(access.VIEWER, "read").get("budgets")
    assert listed.status_code == 200
    (item,) = listed.json()["items"]
    assert (item["name"], item["period"], item["held"]) == ("daily", body["period"], 0)


def test_a_viewer_and_an_operator_may_not_change_budgets(api: Api, api_as: Callable[..., Api]) -> None:
    budget_id = api.post("budgets", DAILY).json()["id"]
    assert_problem(api_as(access.VIEWER, "read").post("budgets", {**DAILY, "name": "other"}), 403)
    assert_problem(api_as(access.OPERATOR, "operate").put(f"budgets/{budget_id}", DAILY), 403)
    assert_problem(api_as(access.OPERATOR, "operate").delete(f"budgets/{budget_id}"), 403)
    assert Budget.objects.count() == 1


@pytest.mark.parametrize(
    ("change", "paths"),
    [
        ({"amount": -1}, ["amount"]),
        ({"amount": "1e40"}, ["amount"]),
        ({"amount": "lots"}, ["amount"]),
        ({"scope": "planet"}, ["scope"]),
        ({"window": "week", "policy": "pray"}, ["window", "policy"]),
        ({"unit": "tokens", "amount": "1.5"}, ["amount"]),
        ({"scope": "tenant"}, ["tenant_key"]),
        ({"scope": "tenant", "tenant_key": "customer id"}, ["tenant_key"]),
        ({"scope": "workflow"}, ["workflow"]),
        ({"scope": "workflow", "workflow": "nowhere"}, ["workflow"]),
        ({"name": " "}, ["name"]),
    ],
)
def test_bad_fields_are_refused_naming_each(api: Api, change: dict[str, Any], paths: list[str]) -> None:
    body = assert_problem(api.post("budgets", {**DAILY, **change}), 422, *paths)
    assert all(path in body["detail"] for path in paths)
    assert not Budget.objects.exists()


def test_a_second_budget_of_the_same_name_is_refused(api: Api) -> None:
    api.post("budgets", DAILY)
    assert_problem(api.post("budgets", DAILY), 422, "name")


def test_a_missing_budget_is_a_404(api: Api) -> None:
    assert_problem(api.get("budgets/999"), 404)
    assert_problem(api.delete("budgets/999"), 404)


def test_a_start_is_refused_with_a_409_naming_the_spent_budget(api: Api, asker: Workflow) -> None:
    made = api.post("budgets", {**DAILY, "scope": "workflow", "workflow": "asker"}).json()
    budget = Budget.objects.get(pk=made["id"])
    period = core.period_of(core.DAY, 0, budget.created_at)
    BudgetLedger.objects.create(budget=budget, period=period, subject="", spent=Decimal("2.5"))

    body = assert_problem(api.post("workflows/asker/runs", {"input": {}}), 409)
    assert "Budget 'daily'" in body["detail"] and "is spent" in body["detail"]
    assert not Run.objects.exists()

    api.put(f"budgets/{budget.pk}", {**DAILY, "amount": 3, "scope": "workflow", "workflow": "asker"})
    assert api.post("workflows/asker/runs", {"input": {}}).status_code == 201


def test_a_tenant_budget_refuses_only_its_spent_tenants_runs(api: Api, asker: Workflow) -> None:
    made = api.post(
        "budgets", {**DAILY, "unit": "tokens", "amount": 10, "scope": "tenant", "tenant_key": "customer_id"}
    ).json()
    budget = Budget.objects.get(pk=made["id"])
    period = core.period_of(core.DAY, 0, budget.created_at)
    BudgetLedger.objects.create(budget=budget, period=period, subject="acme", spent=Decimal(10))

    body = assert_problem(api.post("workflows/asker/runs", {"input": {"customer_id": "acme"}}), 409)
    assert "customer_id 'acme'" in body["detail"]
    assert api.post("workflows/asker/runs", {"input": {"customer_id": "zeta"}}).status_code == 201
    assert api.post("workflows/asker/runs", {"input": {}}).status_code == 201


def test_metrics_show_each_budgets_window(api: Api, person: Callable[[str], Any]) -> None:
    made = api.post("budgets", DAILY).json()
    budget = Budget.objects.get(pk=made["id"])
    period = core.period_of(core.DAY, 0, budget.created_at)
    BudgetLedger.objects.create(
        budget=budget, period=period, subject="", spent=Decimal("1.25"), reserved=Decimal("0.5")
    )
    client = Client()
    client.force_login(person(access.ADMIN))
    text = client.get("/metrics").content.decode()
    labels = '{budget="daily",unit="cost",window="day"}'
    assert f"switchyard_budget_amount{labels} 2.5" in text
    assert f"switchyard_budget_spent{labels} 1.25" in text
    assert f"switchyard_budget_reserved{labels} 0.5" in text
    assert f"switchyard_budget_held{labels} 0.0" in text


def test_an_api_key_budget_covers_only_the_runs_its_key_starts(
    api: Api, asker: Workflow, key_for: Callable[..., str]
) -> None:
    spender, other = key_for(access.OPERATOR, ("run",)), key_for(access.OPERATOR, ("run",))
    prefix = spender.split("_")[1]
    assert_problem(api.post("budgets", {**DAILY, "scope": "api_key", "api_key": "nokey123"}), 422, "api_key")
    assert_problem(api.post("budgets", {**DAILY, "scope": "api_key"}), 422, "api_key")
    made = api.post("budgets", {**DAILY, "scope": "api_key", "api_key": prefix})
    assert made.status_code == 201 and made.json()["api_key"] == prefix

    started = Api(spender).post("workflows/asker/runs", {"input": {}})
    assert started.status_code == 201
    run_id = started.json()["id"]
    assert RunApiKey.objects.get(run_id=run_id).api_key.prefix == prefix
    call = admission.Call(0, run_id, "ask", 1, "default", "m", [{"role": "user", "content": "hi"}], None, 5)
    (covered,) = ledger.worst_cases(call, 5, timezone.now())
    assert covered.budget.name == "daily"

    budget = Budget.objects.get(pk=made.json()["id"])
    period = core.period_of(core.DAY, 0, budget.created_at)
    BudgetLedger.objects.create(budget=budget, period=period, subject="", spent=Decimal("2.5"))
    assert_problem(Api(spender).post("workflows/asker/runs", {"input": {}}), 409)
    assert Api(other).post("workflows/asker/runs", {"input": {}}).status_code == 201
    other_run = Run.objects.order_by("-id").first()
    assert other_run is not None
    call = admission.Call(0, other_run.pk, "ask", 1, "default", "m", [], None, 5)
    assert ledger.worst_cases(call, 5, timezone.now()) == []
