from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone

from controlplane import access
from workflows.integrations import keys
from workflows.runs import letters as deadletters
from workflows.schedules import timetable as schedules
from workflows.store.errors import Invalid
from workflows.store.models import (
    ApiKey,
    DeadLetter,
    NodeRun,
    Run,
    RunEvent,
    Schedule,
    Trigger,
    WebhookDelivery,
    WebhookSubscription,
    Workflow,
    WorkflowVersion,
)


@admin.register(Workflow)
class WorkflowAdmin(admin.ModelAdmin):
    list_display = ["slug", "title", "active_version", "updated_at"]
    search_fields = ["slug", "title"]


@admin.register(WorkflowVersion)
class WorkflowVersionAdmin(admin.ModelAdmin):
    list_display = ["workflow", "number", "status", "checksum", "created_at", "published_at"]
    list_filter = ["status"]
    readonly_fields = ["checksum", "created_at", "published_at"]


class NodeRunInline(admin.TabularInline):
    model = NodeRun
    extra = 0
    fields = ("node_id", "status", "attempt", "worker", "started_at", "finished_at", "error")
    readonly_fields = fields
    can_delete = False


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["id", "workflow", "version", "status", "priority", "created_at", "finished_at"]
    list_filter = ["status", "workflow"]
    inlines = [NodeRunInline]
    readonly_fields = ["workflow", "version", "status", "input", "idempotency_key", "epoch", "finished_at"]


@admin.register(DeadLetter)
class DeadLetterAdmin(admin.ModelAdmin):
    """Dead letters, with the dashboard's actions: replay, discard with a reason (audited)."""

    list_display = ["id", "run", "node_id", "attempt", "status", "created_at", "resolved_by"]
    list_filter = ["status"]
    readonly_fields = ["run", "node_run", "node_id", "attempt", "error", "traceback", "input_snapshot"]
    actions = ["replay_letters", "discard_letters"]

    @admin.action(description="Replay selected dead letters")
    def replay_letters(self, request: HttpRequest, queryset: QuerySet[DeadLetter]) -> None:
        if not access.can(request.user, "replay"):
            self.message_user(request, "Your role may not replay dead letters.", messages.ERROR)
            return
        self.apply(request, queryset, "replay")

    @admin.action(description="Discard selected dead letters (asks for a reason)")
    def discard_letters(self, request: HttpRequest, queryset: QuerySet[DeadLetter]) -> HttpResponse | None:
        if not access.can(request.user, "discard"):
            self.message_user(request, "Your role may not discard dead letters.", messages.ERROR)
            return None
        reason = request.POST.get("reason", "").strip()
        if request.POST.get("confirmed") and reason:
            self.apply(request, queryset, "discard", reason)
            return None
        context = {
            **self.admin_site.each_context(request),
            "letters": queryset,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "missing_reason": bool(request.POST.get("confirmed")),
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "monitoring/admin_discard.html", context)

    def apply(
        self,
        request: HttpRequest,
        queryset: QuerySet[DeadLetter],
        action: deadletters.Action,
        reason: str = "",
    ) -> None:
        """Act on each letter in its own transaction; report what was done and what was refused."""
        ids = list(queryset.order_by("id").values_list("id", flat=True))
        result = deadletters.act_on_letters(action, ids, request.user, reason)
        for refusal in result.refused:
            self.message_user(request, refusal["reason"], messages.WARNING)
        verb = "Replayed" if action == "replay" else "Discarded"
        done = len(result.done)
        self.message_user(
            request, f"{verb} {done} dead letter(s).", messages.SUCCESS if done else messages.INFO
        )


@admin.register(RunEvent)
class RunEventAdmin(admin.ModelAdmin):
    list_display = ["run", "kind", "node_id", "attempt", "at"]
    list_filter = ["kind"]


# --------------------------------------------------------------------------- API keys and webhooks


class AdminsOnly:
    """Only people whose role may manage keys and webhooks see these pages (controlplane.access)."""

    action_name = "manage_keys"

    def has_module_permission(self, request: HttpRequest) -> bool:
        return access.can(request.user, self.action_name)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return access.can(request.user, self.action_name)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ApiKeyForm(forms.ModelForm):
    scopes = forms.MultipleChoiceField(
        choices=[(s, s) for s in access.SCOPES], widget=forms.CheckboxSelectMultiple
    )

    class Meta:
        model = ApiKey
        fields = ["name", "owner", "scopes", "expires_at"]

    def clean_expires_at(self) -> Any:
        expires_at = self.cleaned_data.get("expires_at")
        if expires_at is not None and expires_at <= timezone.now():
            raise forms.ValidationError("The expiry must be in the future.")
        return expires_at


@admin.register(ApiKey)
class ApiKeyAdmin(AdminsOnly, admin.ModelAdmin):
    """Create keys (the secret is shown once, in a message) and revoke them; nothing else changes."""

    form = ApiKeyForm
    list_display = [
        "name",
        "prefix",
        "owner",
        "scopes",
        "created_at",
        "expires_at",
        "revoked_at",
        "last_used_at",
    ]
    list_filter = ["revoked_at"]
    search_fields = ["name", "prefix", "owner__username"]
    actions = ["revoke_keys"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return access.can(request.user, "manage_keys")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in ApiKey._meta.fields] if obj else []

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        if change:
            return
        key, plaintext = keys.create_key(
            obj.owner, obj.name, form.cleaned_data["scopes"], obj.expires_at, actor=request.user
        )
        obj.pk, obj.prefix = key.pk, key.prefix
        self.message_user(request, f"Copy the key now; it is not shown again: {plaintext}", messages.WARNING)

    @admin.action(description="Revoke selected API keys")
    def revoke_keys(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        revoked = 0
        for key_id in queryset.filter(revoked_at__isnull=True).values_list("id", flat=True):
            keys.revoke_key(key_id, actor=request.user)
            revoked += 1
        self.message_user(request, f"Revoked {revoked} API key(s).", messages.SUCCESS)


@admin.register(Trigger)
class TriggerAdmin(AdminsOnly, admin.ModelAdmin):
    action_name = "manage_webhooks"
    list_display = ["name", "workflow", "active", "created_by", "created_at"]
    exclude = ["secret"]


@admin.register(WebhookSubscription)
class WebhookSubscriptionAdmin(AdminsOnly, admin.ModelAdmin):
    action_name = "manage_webhooks"
    list_display = ["id", "workflow", "url", "events", "active", "created_at"]
    exclude = ["secret"]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(AdminsOnly, admin.ModelAdmin):
    action_name = "manage_webhooks"
    list_display = ["id", "subscription", "event_type", "status", "attempts", "response_status", "created_at"]
    list_filter = ["status", "event_type"]


# --- schedules ---


class ScheduleAdminForm(forms.ModelForm):
    """Checked by the domain (workflows/schedules/timetable.py), errors beside their fields."""

    class Meta:
        model = Schedule
        fields = [
            "workflow",
            *schedules.FIELDS,
        ]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        try:
            schedules.check_fields({**schedules.defaults(), **{f: data.get(f) for f in schedules.FIELDS}})
        except Invalid as exc:
            for issue in exc.issues:
                self.add_error(issue.path if issue.path in self.fields else None, issue.message)
        return data


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    """Schedules, saved through the domain so their next fire is computed and audited."""

    form = ScheduleAdminForm
    list_display = [
        "name",
        "workflow",
        "kind",
        "cron",
        "timezone",
        "interval_seconds",
        "enabled",
        "next_fire_at",
    ]
    list_filter = ["enabled", "kind", "workflow"]
    readonly_fields = ["next_fire_at", "last_fire_at", "queued_fires", "last_outcome"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [*self.readonly_fields, "workflow"] if obj else list(self.readonly_fields)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return access.can(request.user, "view")

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return access.can(request.user, "view")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return access.can(request.user, "manage_schedules")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return access.can(request.user, "manage_schedules")

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return access.can(request.user, "manage_schedules")

    def save_model(self, request: HttpRequest, obj: Schedule, form: Any, change: bool) -> None:
        data = {f: form.cleaned_data[f] for f in schedules.FIELDS}
        if change:
            saved = schedules.update_schedule(obj.pk, data, request.user)
        else:
            saved = schedules.create_schedule(form.cleaned_data["workflow"], data, request.user)
        obj.pk = saved.pk

    def delete_model(self, request: HttpRequest, obj: Schedule) -> None:
        schedules.delete_schedule(obj.pk, request.user)
