from __future__ import annotations

from django.urls import path

from monitoring import metrics, views, views_inbox, views_schedules

urlpatterns = [
    path("", views.overview, name="overview"),
    path("workers/", views.workers, name="workers"),
    path("workflows/<slug:slug>/live/", views.workflow_live, name="workflow_live"),
    path("workflows/<slug:slug>/live/nodes/<str:node_id>/", views.workflow_node, name="workflow_node"),
    path("workflows/<slug:slug>/schedules/", views_schedules.workflow_schedules, name="workflow_schedules"),
    path("workflows/<slug:slug>/priority/", views_schedules.workflow_priority, name="workflow_priority"),
    path("schedules/<int:schedule_id>/edit/", views_schedules.schedule_edit, name="schedule_edit"),
    path(
        "schedules/<int:schedule_id>/<str:action>/",
        views_schedules.schedule_action,
        name="schedule_action",
    ),
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
    path("metrics", metrics.metrics, name="metrics"),
]
