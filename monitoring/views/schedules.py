"""Schedules on the pages: every schedule of every workflow (`/schedules/`, searchable) and a
workflow's own, with their next fires and latest runs for viewers; paused, resumed and run
now by operators (`operate_schedules`, `start_run`); created, changed and deleted by editors
(`manage_schedules`): the same checks as the API's (controlplane.access). A refused change
re-renders its form with the errors beside their fields (422)."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from controlplane import access
from monitoring.views.guards import requires
from workflows.core import priorities, schedules as core
from workflows.schedules import board, timetable as schedules
from workflows.store.errors import DomainError, Invalid
from workflows.store.models import Schedule, Workflow
from workflows.versions import catalog

# action -> what it needs (controlplane.access), as the API's pause, resume, run and delete.
ACTIONS = {
    "pause": "operate_schedules",
    "resume": "operate_schedules",
    "run": "start_run",
    "delete": "manage_schedules",
}


class ScheduleForm(forms.Form):
    """The fields as typed; the domain checks them (schedules.check_fields) and names what is wrong."""

    name = forms.CharField(max_length=100)
    kind = forms.ChoiceField(choices=Schedule.KIND_CHOICES)
    cron = forms.CharField(max_length=200, required=False, help_text="Five fields, e.g. 0 9 * * 1-5")
    timezone = forms.CharField(max_length=64, required=False, initial="UTC")
    interval_seconds = forms.IntegerField(required=False, min_value=core.MIN_INTERVAL_SECONDS)
    input = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "class": "code"}), initial="{}", required=False
    )
    priority = forms.IntegerField(
        required=False,
        min_value=priorities.LOWEST,
        max_value=priorities.HIGHEST,
        help_text="empty: the workflow's",
    )
    overlap = forms.ChoiceField(choices=Schedule.OVERLAP_CHOICES, initial=core.OVERLAP_SKIP)
    catchup = forms.ChoiceField(choices=Schedule.CATCHUP_CHOICES, initial=core.CATCHUP_LATEST)
    catchup_bound = forms.IntegerField(min_value=1, max_value=core.MAX_CATCHUP_BOUND, initial=10)
    jitter_seconds = forms.IntegerField(min_value=0, max_value=core.MAX_JITTER_SECONDS, initial=0)

    def clean_input(self) -> Any:
        try:
            return json.loads(self.cleaned_data["input"] or "{}")
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"not JSON: {exc}") from None

    def fields_of(self) -> dict[str, Any]:
        data = dict(self.cleaned_data)
        data["cron"], data["timezone"] = data["cron"] or "", data["timezone"] or "UTC"
        return data


def initial_of(schedule: Schedule) -> dict[str, Any]:
    return {**schedules.described(schedule), "input": json.dumps(schedule.input)}


def save_form(form: ScheduleForm, save: Any) -> Schedule | None:
    """Call `save` with the form's fields; put the domain's refusals beside their fields."""
    if not form.is_valid():
        return None
    try:
        saved: Schedule = save(form.fields_of())
        return saved
    except Invalid as exc:
        for issue in exc.issues:
            form.add_error(issue.path if issue.path in form.fields else None, issue.message)
        if not exc.issues:
            form.add_error(None, exc.message)
    except DomainError as exc:
        field, _, message = exc.message.partition(": ")
        form.add_error(
            field if field in form.fields else None, message if field in form.fields else exc.message
        )
    return None


@require_http_methods(["GET", "POST"])
@requires("view")
def workflow_schedules(request: HttpRequest, slug: str) -> HttpResponse:
    """List a workflow's schedules; an editor adds one (POST)."""
    workflow = get_object_or_404(Workflow, slug=slug)
    form = ScheduleForm(request.POST or None)
    if request.method == "POST":
        requires_manage(request)
        created = save_form(form, lambda data: schedules.create_schedule(workflow, data, request.user))
        if created is not None:
            messages.success(request, f"Schedule {created.name!r} created.")
            return redirect("workflow_schedules", slug=slug)
    context = {
        "workflow": workflow,
        "rows": schedules.overview(workflow),
        "form": form,
        "can_manage": access.can(request.user, "manage_schedules"),
        "can_operate": access.can(request.user, "operate_schedules"),
        "can_run": access.can(request.user, "start_run"),
        "can_edit": access.can(request.user, "edit"),
        "nav": "workflows",
    }
    return render(request, "monitoring/schedules.html", context, status=422 if form.errors else 200)


@require_http_methods(["GET", "POST"])
@requires("manage_schedules")
def schedule_edit(request: HttpRequest, schedule_id: int) -> HttpResponse:
    schedule = get_object_or_404(Schedule.objects.select_related("workflow"), pk=schedule_id)
    form = ScheduleForm(request.POST or None, initial=initial_of(schedule))
    if request.method == "POST":
        saved = save_form(form, lambda data: schedules.update_schedule(schedule.pk, data, request.user))
        if saved is not None:
            messages.success(request, f"Schedule {saved.name!r} saved.")
            return redirect("workflow_schedules", slug=schedule.workflow.slug)
    context = {"schedule": schedule, "workflow": schedule.workflow, "form": form, "nav": "workflows"}
    return render(request, "monitoring/schedule_edit.html", context, status=422 if form.errors else 200)


@require_GET
@requires("view")
def schedules_board(request: HttpRequest) -> HttpResponse:
    """Every schedule of every workflow: next fire, last run, enabled; searched by name or workflow."""
    search = request.GET.get("q", "").strip()
    rows, more = board.board(search)
    context = {
        "rows": rows,
        "more": more,
        "limit": board.BOARD_LIMIT,
        "search": search,
        "can_operate": access.can(request.user, "operate_schedules"),
        "can_run": access.can(request.user, "start_run"),
        "nav": "schedules",
    }
    return render(request, "monitoring/schedules_board.html", context)


@require_POST
def schedule_action(request: HttpRequest, schedule_id: int, action: str) -> HttpResponse:
    """Pause, resume, run now or delete a schedule; back to the page it was asked from."""
    if action not in ACTIONS:
        raise Http404(f"No schedule action {action!r}.")
    return requires(ACTIONS[action])(act_on_schedule)(request, schedule_id, action)


def act_on_schedule(request: HttpRequest, schedule_id: int, action: str) -> HttpResponse:
    schedule = get_object_or_404(Schedule.objects.select_related("workflow"), pk=schedule_id)
    try:
        said = do_action(request, schedule, action)
    except DomainError as exc:  # run now: no active version, an input the workflow refuses
        messages.error(request, f"Schedule {schedule.name!r} did not run: {exc.message}")
    else:
        messages.success(request, said)
    if request.POST.get("back") == "board":
        return redirect("schedules")
    return redirect("workflow_schedules", slug=schedule.workflow.slug)


def do_action(request: HttpRequest, schedule: Schedule, action: str) -> str:
    """Apply one action; say what was done."""
    if action == "delete":
        schedules.delete_schedule(schedule.pk, request.user)
        return f"Schedule {schedule.name!r} deleted."
    if action == "run":
        run = schedules.run_now(schedule.pk, request.user)
        return f"Schedule {schedule.name!r} started run #{run.pk}."
    schedules.set_enabled(schedule.pk, action == "resume", request.user)
    return f"Schedule {schedule.name!r} {action}d."


@require_POST
@requires("edit")
def workflow_priority(request: HttpRequest, slug: str) -> HttpResponse:
    """Set the priority of the workflow's runs started without one."""
    workflow = get_object_or_404(Workflow, slug=slug)
    value = request.POST.get("default_priority", "").strip()
    problem = priorities.check_priority(
        int(value) if value.lstrip("-").isdigit() else value, "default priority"
    )
    if problem:
        messages.error(request, problem)
    else:
        catalog.update_workflow(workflow, {"default_priority": int(value)}, actor=request.user)
        messages.success(request, f"Runs of {workflow.slug} now default to priority {value}.")
    return redirect("workflow_schedules", slug=slug)


def requires_manage(request: HttpRequest) -> None:
    if not access.can(request.user, "manage_schedules"):
        raise PermissionDenied("Your role may not manage schedules.")
