"""Regression suites of a workflow, their cases, and their runs against a version (workflows/suites).

A Suite is a named set of cases on a workflow; `required_to_publish` makes its passing a
condition of publishing a draft. A SuiteCase is a run input, optionally the run it came from
(its `origin`, whose recorded calls a case run replays) and its expectations
(core/expectations.py, kept as their JSON). A SuiteRun is one run of a suite against a
version (a published one, or the snapshot of a draft: `draft` names the draft, `checksum`
its definition): one SuiteCaseRun per case links the case to an ordinary Run, keeps the case's expectations as they were at the start,
says how its calls are made (`calls`, as a fork's: core/callhash.py MODES) and, once the suite run is
evaluated, whether it passed, each expectation's verdict, what changed against the origin,
and its cost. A SuiteRun is evaluated once (`evaluated_at` set in the same statement that
claims it) after its last case run ends. Models are named by label: models.py imports this
module at its end.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Suite(models.Model):
    workflow = models.ForeignKey("workflows.Workflow", on_delete=models.CASCADE, related_name="suites")
    name = models.CharField(max_length=100)
    description = models.CharField(max_length=500, blank=True)
    required_to_publish = models.BooleanField(default=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "workflows"
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["workflow", "name"], name="suite_name_unique")]

    def __str__(self) -> str:
        return f"suite {self.name}"


class SuiteCase(models.Model):
    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="cases")
    name = models.CharField(max_length=200)
    input = models.JSONField(default=dict)
    # SET_NULL: retention may delete the origin; the case still runs, live.
    origin = models.ForeignKey(
        "workflows.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    expectations = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "workflows"
        ordering = ["id"]

    def __str__(self) -> str:
        return f"case {self.name}"


class SuiteRun(models.Model):
    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="runs")
    version = models.ForeignKey("workflows.WorkflowVersion", on_delete=models.PROTECT, related_name="+")
    draft = models.ForeignKey(
        "workflows.WorkflowVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    checksum = models.CharField(max_length=80)  # of the definition tested (the draft's, for a draft)
    calls = models.CharField(max_length=20)
    passed = models.BooleanField(null=True)  # None until evaluated
    summary = models.JSONField(default=dict)  # cases, passed, failed, cost (evaluated)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    evaluated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        app_label = "workflows"
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["suite", "-id"], name="suiterun_suite_idx"),
            models.Index(
                fields=["id"], condition=models.Q(evaluated_at__isnull=True), name="suiterun_open_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"suite run {self.pk}"


class SuiteCaseRun(models.Model):
    suite_run = models.ForeignKey(SuiteRun, on_delete=models.CASCADE, related_name="cases")
    case = models.ForeignKey(SuiteCase, null=True, on_delete=models.SET_NULL, related_name="+")
    case_name = models.CharField(max_length=200)
    run = models.OneToOneField("workflows.Run", on_delete=models.CASCADE, related_name="suite_case")
    origin = models.ForeignKey(
        "workflows.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    calls = models.CharField(max_length=20)
    # The case's expectations as they were when the suite run started (the case may change or go).
    expectations = models.JSONField(default=list)
    passed = models.BooleanField(null=True)
    verdicts = models.JSONField(default=list)  # [{expectation, passed, message, judge}]
    changed = models.JSONField(default=list)  # node ids whose status or output differ from the origin's
    cost = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)

    class Meta:
        app_label = "workflows"
        ordering = ["id"]

    def __str__(self) -> str:
        return f"case {self.case_name} of suite run {self.suite_run_id}"
