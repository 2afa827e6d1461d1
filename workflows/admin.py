from __future__ import annotations

from django.contrib import admin

from workflows.models import DeadLetter, NodeRun, Run, RunEvent, Workflow, WorkflowVersion


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
    fields = ["node_id", "status", "attempt", "worker", "started_at", "finished_at", "error"]
    readonly_fields = fields
    can_delete = False


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["id", "workflow", "version", "status", "created_at", "finished_at"]
    list_filter = ["status", "workflow"]
    inlines = [NodeRunInline]
    readonly_fields = ["workflow", "version", "status", "input", "idempotency_key", "epoch", "finished_at"]


@admin.register(DeadLetter)
class DeadLetterAdmin(admin.ModelAdmin):
    list_display = ["id", "run", "node_id", "attempt", "status", "created_at", "resolved_by"]
    list_filter = ["status"]
    readonly_fields = ["run", "node_run", "node_id", "attempt", "error", "traceback", "input_snapshot"]


@admin.register(RunEvent)
class RunEventAdmin(admin.ModelAdmin):
    list_display = ["run", "kind", "node_id", "attempt", "at"]
    list_filter = ["kind"]
