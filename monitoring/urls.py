from __future__ import annotations

from django.urls import path

from monitoring import metrics, views, views_charts, views_inbox, views_manage

urlpatterns = [
    path("", views.overview, name="overview"),
    path("workers/", views.workers, name="workers"),
    path("workers/drain/", views_manage.worker_drain, name="worker_drain"),
    path("workers/pause/", views_manage.workers_pause, name="workers_pause"),
    path("workflows/<slug:slug>/live/", views.workflow_live, name="workflow_live"),
    path("workflows/<slug:slug>/live/nodes/<str:node_id>/", views.workflow_node, name="workflow_node"),
    path("runs/", views.runs_list, name="runs"),
    path("runs/<int:run_id>/", views.run_detail, name="run_detail"),
    path("runs/<int:run_id>/nodes/<str:node_id>/", views.run_node, name="run_node"),
    path("runs/<int:run_id>/cancel/", views.run_cancel, name="run_cancel"),
    path("dead-letters/", views.deadletters_list, name="deadletters"),
    path("dead-letters/bulk/", views.deadletters_bulk, name="deadletters_bulk"),
    path("dead-letters/<int:letter_id>/", views.deadletter_detail, name="deadletter_detail"),
    path("dead-letters/<int:letter_id>/replay/", views.deadletter_replay, name="deadletter_replay"),
    path("dead-letters/<int:letter_id>/discard/", views.deadletter_discard, name="deadletter_discard"),
    path("inbox/", views_inbox.inbox, name="inbox"),
    path("inbox/count/", views_inbox.inbox_count, name="inbox_count"),
    path("inbox/bulk/", views_inbox.inbox_bulk, name="inbox_bulk"),
    path("inbox/<int:approval_id>/", views_inbox.approval_detail, name="inbox_detail"),
    path("inbox/<int:approval_id>/decide/", views_inbox.approval_decide, name="inbox_decide"),
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
