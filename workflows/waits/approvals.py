"""Approvals: deciding a waiting `human.approval` (directly or by a signed link), who may,
and the inbox of what a person may decide.

A decision is a conditional UPDATE (`transitions.decide_waits`) in the caller's transaction
with its Wait row locked, so two deciders, or a decision racing the deadline, change the
node once; the loser is told why and nothing else changes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from controlplane import access
from workflows.core import waits as core
from workflows.core.definition import Issue
from workflows.core.graph import APPROVAL
from workflows.core.states import NodeStatus as N
from workflows.runtime import bus, transitions
from workflows.runtime.transitions import Awake
from workflows.store import audit
from workflows.store.errors import Conflict, DomainError, Forbidden, Invalid, NotFound
from workflows.store.models import NodeRun, RunEvent, Wait
from workflows.store.payloads import check_json_size
from workflows.store.statements import WAITS
from workflows.waits.waiting import close, history_fields, node_config

LINK_SALT = "switchyard.waits.decision-link"


class LinkRefused(DomainError):
    """A decision link that is forged, expired or already used (403)."""

    http_status = 403


def decide(
    wait_id: int,
    user: Any,
    decision: str,
    fields: Any = None,
    comment: str = "",
    data: Any = None,
    via: str = "",
    now: datetime | None = None,
) -> Wait:
    """Approve or reject a waiting approval; the decision becomes the node's output.

    Refused, changing nothing: someone not allowed (Forbidden), a node no longer waiting or
    decided already (Conflict), after the deadline (Conflict), fields failing the form's
    schema (Invalid, naming each field).
    """
    now = now or timezone.now()
    fields = {} if fields is None else fields
    with transaction.atomic():
        wait = locked_wait(wait_id)
        check_decidable(wait, user, now)
        config = node_config(wait)
        output = decision_output(wait, config, user, decision, fields, comment, data, via, now)
        changed = transitions.decide_waits(
            [Awake(wait.node_run_id, wait.attempt, N.SUCCEEDED, json.dumps(output))]
        )
        if not changed:
            raise Conflict(f"Approval {wait.pk} ({wait.node_id} of run {wait.run_id}) is no longer waiting.")
        close([wait], "decided", output)
        # At the node's own end (the statement's clock), so the trace and the API agree.
        RunEvent.objects.create(**history_fields("approval.decided", wait, output) | {"at": changed[0][6]})
        audit.record(user, "approval.decide", wait, run=wait.run_id, node=wait.node_id, decision=output)
    transaction.on_commit(lambda: bus.notify([wait.run_id]))
    return wait


def get_approval(approval_id: int) -> Wait:
    """The approval (waiting or not) with its workflow, run and node row; NotFound if none."""
    try:
        return Wait.objects.select_related("workflow", "node_run", "run").get(pk=approval_id, kind=APPROVAL)
    except Wait.DoesNotExist:
        raise NotFound(f"No approval with id {approval_id}.") from None


def locked_wait(wait_id: int) -> Wait:
    try:
        return Wait.objects.select_for_update().select_related("node_run").get(pk=wait_id, kind=APPROVAL)
    except (Wait.DoesNotExist, ValueError, TypeError):
        raise NotFound(f"No approval with id {wait_id}.") from None


def check_decidable(wait: Wait, user: Any, now: datetime) -> None:
    if wait.closed_at is not None:
        raise Conflict(
            f"Approval {wait.pk} was already {wait.outcome} at {wait.closed_at.isoformat()}; it is no longer waiting."
        )
    node = wait.node_run
    if node.status != N.WAITING or node.attempt != wait.attempt:
        raise Conflict(f"Approval {wait.pk}: node {wait.node_id} is {node.status}, no longer waiting.")
    if wait.expires_at is not None and wait.expires_at <= now:
        raise Conflict(
            f"Approval {wait.pk} timed out at {wait.expires_at.isoformat()}; it can no longer be decided."
        )
    if not can_decide(user, wait):
        raise Forbidden(f"{audit.actor_label(user)} may not decide approval {wait.pk} ({wait.node_id}).")


def decision_output(
    wait: Wait,
    config: Mapping[str, Any],
    user: Any,
    decision: str,
    fields: Any,
    comment: str,
    data: Any,
    via: str,
    now: datetime,
) -> dict[str, Any]:
    if decision not in (core.APPROVE, core.REJECT):
        raise Invalid(
            f"decision must be 'approve' or 'reject', not {decision!r}.",
            [Issue("decision", "must be approve or reject")],
        )
    problems = core.form_errors(config.get("form"), fields)
    if problems:
        issues = [Issue(path, message) for path, message in problems]
        raise Invalid(f"The decision's fields do not fit the form of {wait.node_id}.", issues)
    if not isinstance(comment, str) or len(comment) > 5000:
        raise Invalid(
            "comment must be text of at most 5000 characters.", [Issue("comment", "too long or not text")]
        )
    final = wait.proposed if data is None else data
    output = {
        "decision": core.APPROVED if decision == core.APPROVE else core.REJECTED,
        "approved": decision == core.APPROVE,
        "by": audit.actor_label(user),
        "at": now.isoformat(),
        "fields": fields,
        "comment": comment,
        "data": final,
        "edited": core.edits_of(wait.proposed, data),
        "via": via or "direct",
    }
    check_json_size(output, settings.SWITCHYARD["MAX_OUTPUT_BYTES"], "decision")
    return output


def can_decide(user: Any, wait: Wait) -> bool:
    """Whether `user` may decide this approval: named, in a named group, holding a named role
    (or one above it), or any operator when the node names nobody; admins always."""
    if not access.can(user, "decide_approval"):
        return False
    if access.role_of(user) == access.ADMIN:
        return True
    if user.get_username() in wait.users or any(
        access.has_role(user, r) for r in wait.roles if r in access.ROLES
    ):
        return True
    if wait.groups and user.groups.filter(name__in=wait.groups).exists():
        return True
    return wait.open_to_operators and access.has_role(user, access.OPERATOR)


def decision_link_token(wait: Wait, user: Any, decision: str, ttl_seconds: float | None = None) -> str:
    """A signed token deciding `wait` as `user` (approve or reject), valid for `ttl_seconds`."""
    if decision not in (core.APPROVE, core.REJECT):
        raise Invalid(f"decision must be 'approve' or 'reject', not {decision!r}.")
    ttl = ttl_seconds if ttl_seconds is not None else settings.SWITCHYARD["DECISION_LINK_SECONDS"]
    expires = timezone.now().timestamp() + ttl
    payload = {"w": wait.pk, "a": wait.attempt, "u": user.pk, "d": decision, "e": expires}
    return signing.dumps(payload, salt=LINK_SALT, compress=True)


def decide_by_link(token: str, comment: str = "", now: datetime | None = None) -> Wait:
    """Decide as a signed link says; refuse a forged, expired or already used link."""
    now = now or timezone.now()
    try:
        claim = signing.loads(token, salt=LINK_SALT)
    except signing.BadSignature:
        raise LinkRefused("This decision link is not valid: its signature does not match.") from None
    if now.timestamp() > claim["e"]:
        raise LinkRefused("This decision link has expired; decide in the inbox instead.")
    wait = Wait.objects.filter(pk=claim["w"]).select_related("node_run").first()
    if wait is None or wait.attempt != claim["a"] or wait.closed_at is not None:
        raise LinkRefused("This decision link was already used, or its approval is no longer waiting.")
    user = get_user_model().objects.filter(pk=claim["u"], is_active=True).first()
    if user is None:
        raise LinkRefused("The person this decision link was made for can no longer decide.")
    return decide(wait.pk, user, claim["d"], comment=comment, via="link", now=now)


@dataclass(frozen=True)
class InboxFilters:
    workflow: str = ""  # a workflow's slug
    node: str = ""  # a node id
    older_than_seconds: float | None = None
    newer_than_seconds: float | None = None
    assignee: str = ""  # a username among the named deciders


def inbox_queryset(
    user: Any, filters: InboxFilters | None = None, now: datetime | None = None
) -> QuerySet[Wait]:
    """Every approval waiting that `user` may decide, by due time (none last), oldest first."""
    filters = filters or InboxFilters()
    now = now or timezone.now()
    waits = Wait.objects.filter(kind=APPROVAL, closed_at__isnull=True, node_run__status=N.WAITING).filter(
        decider_filter(user)
    )
    if filters.workflow:
        waits = waits.filter(workflow__slug=filters.workflow)
    if filters.node:
        waits = waits.filter(node_id=filters.node)
    if filters.older_than_seconds is not None:
        waits = waits.filter(created_at__lte=now - timedelta(seconds=filters.older_than_seconds))
    if filters.newer_than_seconds is not None:
        waits = waits.filter(created_at__gte=now - timedelta(seconds=filters.newer_than_seconds))
    if filters.assignee:
        waits = waits.filter(users__contains=[filters.assignee])
    ordered = waits.select_related("workflow", "node_run").order_by("due_at", "id")
    return ordered.extra(select={"overdue": f"{WAITS}.due_at < %s"}, select_params=[now])  # noqa: S610


def inbox(
    user: Any, filters: InboxFilters | None = None, now: datetime | None = None, limit: int = 200
) -> list[Wait]:
    """The inbox: `inbox_queryset`, each Wait with `overdue` set."""
    return list(inbox_queryset(user, filters, now)[:limit])


def decider_filter(user: Any) -> Q:
    """The approvals `user` may decide, as a filter (can_decide, in SQL)."""
    if not access.can(user, "decide_approval"):
        return Q(pk__in=[])
    if access.role_of(user) == access.ADMIN:
        return Q()
    held = [r for r in access.ROLES if access.has_role(user, r)]
    names = list(user.groups.values_list("name", flat=True))
    allowed = (
        Q(users__contains=[user.get_username()]) | Q(roles__overlap=held) | Q(groups__overlap=names or [""])
    )
    if access.has_role(user, access.OPERATOR):
        allowed |= Q(open_to_operators=True)
    return allowed


def approval_context(wait: Wait) -> dict[str, Any]:
    """What the approver is shown: title, instructions, form, proposed data, the run input
    (unless hidden) and the chosen predecessors' outputs."""
    config = node_config(wait)
    shown = list(config.get("show_upstream", []))
    outputs = dict(
        NodeRun.objects.filter(run_id=wait.run_id, node_id__in=shown, status=N.SUCCEEDED).values_list(
            "node_id", "output"
        )
    )
    return {
        "title": config.get("title") or wait.node_id,
        "instructions": config.get("instructions", ""),
        "form": config.get("form") or {"type": "object"},
        "proposed": wait.proposed,
        "input": wait.run.input if config.get("show_input", True) else None,
        "upstream": {n: outputs[n] for n in shown if n in outputs},
    }
