"""Spend budgets: read by viewers (with their figures and the attempts they hold), saved and
deleted by admins, and a held call allowed over its budget once (admins).

The body's fields are checked by the domain (workflows/budgets/manage.py, one place for the
page's form and this API); each bad field is an entry of the 422's `errors`, by name.
"""

from __future__ import annotations

from typing import Annotated, Any

from django.http import HttpRequest, HttpResponse
from ninja import Path, Router, Status
from pydantic import Field
from typing_extensions import TypedDict

from workflows.api.auth import ApiRequest, allowed
from workflows.api.inputs import Body
from workflows.api.schema import refuses
from workflows.budgets import holds, manage
from workflows.store.models import BudgetHold

router = Router(tags=["budgets"])
MAX_ID = 2**63 - 1
BudgetId = Annotated[int, Path(ge=1, le=MAX_ID)]


class BudgetIn(Body):
    name: str = Field(max_length=1000)
    unit: str = Field(max_length=100, description="tokens or cost (the price table's currency)")
    amount: int | float | str = Field(description="At least 0; a whole number for tokens")
    window: str = Field(max_length=100, description="run, day or month (UTC)")
    scope: str = Field(max_length=100, description="global, workflow, api_key or tenant")
    workflow: str | None = Field(None, max_length=100, description="The workflow's slug (scope workflow)")
    api_key: str | None = Field(None, max_length=100, description="The key's prefix (scope api_key)")
    tenant_key: str | None = Field(None, max_length=1000, description="A run input field (scope tenant)")
    tenant_value: str | None = Field(
        None, max_length=1000, description="Only this value (scope tenant); none: each value its own budget"
    )
    policy: str = Field("wait", max_length=100, description="wait, ask or fail, when a call does not fit")


class HoldOut(TypedDict):
    id: int
    run: int
    workflow: str
    node: str
    attempt: int
    reason: Annotated[str, Field(description="budget: over it; price: no price for the model")]
    need: str | None
    subject: str
    since: str


class BudgetOut(TypedDict):
    id: int
    name: str
    unit: str
    amount: str
    window: str
    scope: str
    workflow: str | None
    api_key: str | None
    tenant_key: str
    tenant_value: str
    policy: str
    period: str
    spent: str
    reserved: str
    left: Annotated[str | None, Field(description="null: per run, or per tenant value (see the ledger)")]
    held: int
    resets_at: str | None


class BudgetDetail(BudgetOut):
    holds: list[HoldOut]


class BudgetList(TypedDict):
    items: list[BudgetOut]


def hold_out(row: BudgetHold) -> HoldOut:
    return {
        "id": row.pk,
        "run": row.run_id,
        "workflow": row.run.workflow.slug,
        "node": row.wait.node_id,
        "attempt": row.attempt,
        "reason": row.reason,
        "need": None if row.need is None else manage.plain(row.need),
        "subject": row.subject,
        "since": row.created_at.isoformat(),
    }


def detail(budget_id: int) -> dict[str, Any]:
    (found,) = manage.figures([manage.get_budget(budget_id)])
    return {**found.as_dict(), "holds": [hold_out(h) for h in holds.held_by(budget_id)]}


@router.get("/budgets", response=BudgetList, auth=allowed("view"), summary="List spend budgets")
def list_budgets(request: HttpRequest) -> Any:
    """Every budget with its current window's figures: spent, reserved, left, attempts held."""
    return {"items": [f.as_dict() for f in manage.figures()]}


@router.post("/budgets", response={201: BudgetDetail}, auth=allowed("manage_budgets"), summary="Add a budget")
def create_budget(request: ApiRequest, response: HttpResponse, body: BudgetIn) -> Any:
    """Add a budget; LLM calls under it reserve their worst case against it from now on."""
    budget = manage.save_budget(body.model_dump(), actor=request.auth)
    response["Location"] = f"/api/v1/budgets/{budget.pk}"
    return Status(201, detail(budget.pk))


@router.get("/budgets/{id}", response=BudgetDetail, auth=allowed("view"), summary="Read a budget")
@refuses(404)
def read_budget(request: HttpRequest, id: BudgetId) -> Any:
    """A budget, its figures, and the attempts it holds now."""
    return detail(id)


@router.put("/budgets/{id}", response=BudgetDetail, auth=allowed("manage_budgets"), summary="Change a budget")
@refuses(404)
def update_budget(request: ApiRequest, id: BudgetId, body: BudgetIn) -> Any:
    """Replace a budget's fields; raised, the attempts it held are offered again within a second."""
    manage.save_budget(body.model_dump(), id, actor=request.auth)
    return detail(id)


@router.delete(
    "/budgets/{id}", response={204: None}, auth=allowed("manage_budgets"), summary="Delete a budget"
)
@refuses(404)
def delete_budget(request: ApiRequest, id: BudgetId) -> Any:
    """Delete a budget; the attempts it held are offered again."""
    manage.delete_budget(id, actor=request.auth)
    return Status(204, None)


@router.post(
    "/budget-holds/{id}/allow",
    response=HoldOut,
    auth=allowed("manage_budgets"),
    summary="Allow a held call over its budget, once",
)
@refuses(404, 409)
def allow_hold(request: ApiRequest, id: BudgetId) -> Any:
    """Let the held call go over its budget this once (policy ask); its attempt is queued again."""
    row = holds.allow_once(id, request.auth)
    return hold_out(BudgetHold.objects.select_related("wait", "run__workflow").get(pk=row.pk))
