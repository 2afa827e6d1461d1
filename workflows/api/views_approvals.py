"""Approvals: the pending ones a person may decide, one with its context, decisions, links."""

from __future__ import annotations

from typing import Annotated, Any

from django.http import HttpRequest
from django.utils import timezone
from ninja import Path, Query, Router, Status

from workflows.api import inputs as i, serializers as s
from workflows.api.auth import ApiRequest, allowed, person_of
from workflows.api.parsing import MAX_ID
from workflows.api.schema import refuses
from workflows.waits import approvals

router = Router(tags=["approvals"])
ApprovalId = Annotated[int, Path(ge=1, le=MAX_ID)]


@router.get(
    "/approvals", response=s.ApprovalPage, auth=allowed("decide_approval"), summary="List pending approvals"
)
def list_approvals(request: ApiRequest, q: Query[i.ApprovalQuery]) -> Any:
    """List the approvals waiting that the caller may decide, by due time (none last); overdue ones are marked."""
    filters = approvals.InboxFilters(
        workflow=q.workflow or "",
        node=q.node_id or "",
        older_than_seconds=q.older_than_seconds,
        newer_than_seconds=q.newer_than_seconds,
        assignee=q.assignee or "",
    )
    items = approvals.inbox(person_of(request.auth), filters, limit=q.limit)
    return {"items": [s.approval_summary(w) for w in items], "next_cursor": None}


@router.get(
    "/approvals/{id:approval_id}",
    response=s.ApprovalOut,
    auth=allowed("decide_approval"),
    summary="Read an approval",
)
@refuses(404)
def read_approval(request: HttpRequest, approval_id: ApprovalId) -> Any:
    """Read an approval: what it shows (title, form, proposed data, input, chosen upstream outputs) and how it ended."""
    wait = approvals.get_approval(approval_id)
    return s.approval(wait, approvals.approval_context(wait), timezone.now())


@router.post(
    "/approvals/{id:approval_id}/decide",
    response=s.ApprovalOut,
    auth=allowed("decide_approval"),
    summary="Decide an approval",
)
@refuses(404, 409, 422)
def decide_approval(request: ApiRequest, approval_id: ApprovalId, body: i.DecisionIn) -> Any:
    """Approve or reject, with the form's fields, a comment and the proposed data as edited.
    403 for someone the node does not name, 409 once it no longer waits or has timed out, 422 for fields off the form."""
    approvals.decide(
        approval_id, person_of(request.auth), body.decision, body.fields, body.comment, body.data, via="api"
    )
    wait = approvals.get_approval(approval_id)
    return s.approval(wait, approvals.approval_context(wait), timezone.now())


@router.post(
    "/approvals/{id:approval_id}/links",
    response={201: s.DecisionLinkOut},
    auth=allowed("decide_approval"),
    summary="Make a decision link",
)
@refuses(404)
def make_decision_link(request: ApiRequest, approval_id: ApprovalId, body: i.DecisionLinkIn) -> Any:
    """Make a signed, expiring token that decides this approval as the caller, once, for a chat message or an e-mail."""
    wait = approvals.get_approval(approval_id)
    token = approvals.decision_link_token(wait, person_of(request.auth), body.decision, body.ttl_seconds)
    return Status(201, {"token": token, "decision": body.decision})


@router.post(
    "/approvals/decide-by-link", response=s.ApprovalOut, auth=None, summary="Decide by a signed link"
)
@refuses(403, 409, 422)
def decide_by_link(request: HttpRequest, body: i.LinkDecisionIn) -> Any:
    """Decide as a signed decision link says; the token is the credential. A forged, expired or used one is a 403."""
    wait = approvals.decide_by_link(body.token, body.comment)
    wait = approvals.get_approval(wait.pk)
    return s.approval(wait, approvals.approval_context(wait), timezone.now())
