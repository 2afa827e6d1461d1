from __future__ import annotations

from django.urls import path
from django.views.generic import RedirectView

from monitoring.views import (
    charts as views_charts,
    forks as views_forks,
    inbox as views_inbox,
    letters as views_letters,
    manage as views_manage,
    metrics,
    overview as views,
    retention as views_retention,
    runs as views_runs,
    schedules as views_schedules,
)

urlpatterns = [
    path("", views.overview, name="overview"),
    path("flow-keys/", views.busiest_keys, name="busiest_keys"),
    path("workers/", views.workers, name="workers"),
    path("workers/drain/", views_manage.worker_drain, name="worker_drain"),
    path("workers/pause/", views_manage.workers_pause, name="workers_pause"),
    path("workflows/<slug:slug>/live/", views.workflow_live, name="workflow_live"),
    path("workflows/<slug:slug>/live/keys/", views.workflow_flow_keys, name="workflow_flow_keys"),
    path("workflows/<slug:slug>/live/nodes/<str:node_id>/", views.workflow_node, name="workflow_node"),
    path("workflows/<slug:slug>/schedules/", views_schedules.workflow_schedules, name="workflow_schedules"),
    path("workflows/<slug:slug>/priority/", views_schedules.workflow_priority, name="workflow_priority"),
    path("schedules/", views_schedules.schedules_board, name="schedules"),
    path("schedules/<int:schedule_id>/edit/", views_schedules.schedule_edit, name="schedule_edit"),
    path(
        "schedules/<int:schedule_id>/<str:action>/",
        views_schedules.schedule_action,
        name="schedule_action",
    ),
    path("runs/", views_runs.runs_list, name="runs"),
    path("runs/bulk/", views_runs.runs_bulk, name="runs_bulk"),
    path("runs/<int:run_id>/", views.run_detail, name="run_detail"),
    path("runs/<int:run_id>/nodes/<str:node_id>/", views.run_node, name="run_node"),
    path("runs/<int:run_id>/nodes/<str:node_id>/steps/", views.run_node_steps, name="run_node_steps"),
    path("runs/<int:run_id>/nodes/<str:node_id>/items/", views.run_node_items, name="run_node_items"),
    path("runs/<int:run_id>/cancel/", views.run_cancel, name="run_cancel"),
    path("runs/<int:run_id>/rerun/", views_runs.run_rerun, name="run_rerun"),
    path("runs/<int:run_id>/fork/", views_forks.run_fork, name="run_fork"),
    path("runs/<int:run_id>/nodes/<str:node_id>/calls/", views_forks.run_node_calls, name="run_node_calls"),
    path("runs/<int:run_id>/compare/<int:other_id>/", views_forks.runs_compare, name="runs_compare"),
    path("dead-letters/", views_letters.deadletters_list, name="deadletters"),
    path("deadletters/", RedirectView.as_view(pattern_name="deadletters", query_string=True)),
    path("dead-letters/bulk/", views_letters.deadletters_bulk, name="deadletters_bulk"),
    path("dead-letters/<int:letter_id>/", views_letters.deadletter_detail, name="deadletter_detail"),
    path(
        "dead-letters/<int:letter_id>/outcome/", views_letters.deadletter_outcome, name="deadletter_outcome"
    ),
    path("dead-letters/<int:letter_id>/replay/", views_letters.deadletter_replay, name="deadletter_replay"),
    path(
        "dead-letters/<int:letter_id>/discard/", views_letters.deadletter_discard, name="deadletter_discard"
    ),
    path("inbox/", views_inbox.inbox, name="inbox"),
    path("inbox/count/", views_inbox.inbox_count, name="inbox_count"),
    path("inbox/bulk/", views_inbox.inbox_bulk, name="inbox_bulk"),
    path("inbox/<int:approval_id>/", views_inbox.approval_detail, name="inbox_detail"),
    path("inbox/<int:approval_id>/decide/", views_inbox.approval_decide, name="inbox_decide"),
    path("retention/", views_retention.retention_page, name="retention"),
    path("retention/workflows/<slug:slug>/", views_retention.workflow_retention, name="workflow_retention"),
    path("keys/", views_manage.api_keys, name="api_keys"),
    path("keys/<int:key_id>/revoke/", views_manage.api_key_revoke, name="api_key_revoke"),
    path("workflows/<slug:slug>/pause/", views_manage.workflow_pause, name="workflow_pause"),
    path("workflows/<slug:slug>/resume/", views_manage.workflow_resume, name="workflow_resume"),
    path("workflows/<slug:slug>/webhooks/", views_manage.workflow_webhooks, name="workflow_webhooks"),
    path("workflows/<slug:slug>/webhooks/triggers/", views_manage.trigger_create, name="trigger_create"),
    path(
        "workflows/<slug:slug>/webhooks/triggers/<uuid:trigger_id>/rotate/",
        views_manage.trigger_rotate,
        name="trigger_rotate",
    ),
    path(
        "workflows/<slug:slug>/webhooks/triggers/<uuid:trigger_id>/delete/",
        views_manage.trigger_delete,
        name="trigger_delete",
    ),
    path(
        "workflows/<slug:slug>/webhooks/subscriptions/",
        views_manage.subscription_create,
        name="subscription_create",
    ),
    path(
        "workflows/<slug:slug>/webhooks/subscriptions/<int:subscription_id>/",
        views_manage.subscription_detail,
        name="subscription_detail",
    ),
    path(
        "workflows/<slug:slug>/webhooks/subscriptions/<int:subscription_id>/delete/",
        views_manage.subscription_delete,
        name="subscription_delete",
    ),
    path(
        "workflows/<slug:slug>/webhooks/subscriptions/<int:subscription_id>/deliveries/<int:delivery_id>/resend/",
        views_manage.delivery_resend,
        name="delivery_resend",
    ),
    path("charts/<str:name>.json", views_charts.chart_data, name="chart_data"),
    path("metrics", metrics.metrics, name="metrics"),
]
