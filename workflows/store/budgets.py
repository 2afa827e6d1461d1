"""The models of spend budgets (workflows/budgets): the budgets, their ledgers, reservations
and the attempts they hold. What each field means is core/budgets.py's.

Imported at the end of models.py; it names the models there by their labels, never by
import, so the two modules do not import each other.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from workflows.core import budgets as core


class Budget(models.Model):
    """A cap on what LLM calls spend: `amount` of `unit` per `window`, for a `scope`."""

    name = models.CharField(max_length=100, unique=True)
    unit = models.CharField(max_length=10, choices=[(u, u) for u in core.UNITS])
    amount = models.DecimalField(max_digits=24, decimal_places=8)
    window = models.CharField(max_length=10, choices=[(w, w) for w in core.WINDOWS])
    scope = models.CharField(max_length=10, choices=[(s, s) for s in core.SCOPES])
    workflow = models.ForeignKey(
        "workflows.Workflow", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    api_key = models.ForeignKey(
        "workflows.ApiKey", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    tenant_key = models.CharField(max_length=100, blank=True)  # a path into the run input
    tenant_value = models.CharField(max_length=200, blank=True)  # blank: each value its own budget
    policy = models.CharField(max_length=10, choices=[(p, p) for p in core.POLICIES], default=core.WAIT)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"budget {self.name}"


class BudgetLedger(models.Model):
    """What one window of one budget holds for one subject (a tenant value, or ""):
    `spent` by settled calls, `reserved` by calls in flight. Changed only by conditional
    UPDATEs (workflows/budgets/ledger.py)."""

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="ledgers")
    period = models.CharField(max_length=40)  # core.period_of: run:<id>, YYYY-MM-DD, YYYY-MM
    subject = models.CharField(max_length=200, blank=True)
    spent = models.DecimalField(max_digits=24, decimal_places=8, default=0)
    reserved = models.DecimalField(max_digits=24, decimal_places=8, default=0)
    calls = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)
    # When this window first reached the alert threshold and first refused a call
    # (workflows/budgets/alerts.py): each alert is sent once per window, again after a raise.
    threshold_at = models.DateTimeField(null=True, blank=True)
    exhausted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["budget", "period", "subject"], name="budget_ledger_unique")
        ]

    def __str__(self) -> str:
        return f"{self.budget_id} {self.period} {self.subject}"


class BudgetReservation(models.Model):
    """One call's worst case held against one ledger until the call settles (`settled_at`)."""

    ledger = models.ForeignKey(BudgetLedger, on_delete=models.CASCADE, related_name="reservations")
    node_run = models.ForeignKey(
        "workflows.NodeRun", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    attempt = models.PositiveIntegerField()
    amount = models.DecimalField(max_digits=24, decimal_places=8)
    spent = models.DecimalField(max_digits=24, decimal_places=8, null=True, blank=True)
    overspend = models.BooleanField(default=False)  # let through over the budget by a person, once
    created_at = models.DateTimeField(auto_now_add=True)
    settled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["created_at"], condition=Q(settled_at__isnull=True), name="budget_open_res_idx"
            ),
            models.Index(fields=["node_run", "attempt"], name="budget_res_attempt_idx"),
        ]

    def __str__(self) -> str:
        return f"reservation {self.amount} on {self.ledger_id}"


class BudgetHold(models.Model):
    """An attempt held by a budget (its node `waiting`, its Wait row of kind "budget"):
    what it needs, why, and how the hold ended (`outcome`: released, allowed, cancelled)."""

    wait = models.ForeignKey(
        "workflows.Wait", on_delete=models.CASCADE, related_name="budget_holds"
    )  # reopened per hold
    budget = models.ForeignKey(
        Budget, null=True, on_delete=models.SET_NULL, related_name="holds"
    )  # None: deleted, released
    node_run = models.ForeignKey(
        "workflows.NodeRun", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    run = models.ForeignKey("workflows.Run", on_delete=models.CASCADE, related_name="+", db_index=False)
    attempt = models.PositiveIntegerField()
    reason = models.CharField(max_length=10)  # core.OVER or core.NO_PRICE
    need = models.DecimalField(
        max_digits=24, decimal_places=8, null=True, blank=True
    )  # the call's worst case
    subject = models.CharField(max_length=200, blank=True)
    model = models.CharField(max_length=200, blank=True)
    provider = models.CharField(max_length=60, blank=True)
    allowed = models.BooleanField(default=False)  # a person allowed this call over the budget, once
    created_at = models.DateTimeField(auto_now_add=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=20, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(
                fields=["budget", "id"], condition=Q(closed_at__isnull=True), name="budget_open_hold_idx"
            ),
            models.Index(fields=["node_run", "attempt"], name="budget_hold_attempt_idx"),
        ]

    def __str__(self) -> str:
        return f"hold of {self.node_run_id} by {self.budget_id}"


class RunApiKey(models.Model):
    """The API key that started a run, written in the transaction that creates it (budgets of
    scope api_key read it; runs started by a person or a schedule have none)."""

    run = models.OneToOneField("workflows.Run", on_delete=models.CASCADE, primary_key=True, related_name="+")
    api_key = models.ForeignKey(
        "workflows.ApiKey", on_delete=models.CASCADE, related_name="+", db_index=False
    )

    def __str__(self) -> str:
        return f"run {self.run_id} by key {self.api_key_id}"
