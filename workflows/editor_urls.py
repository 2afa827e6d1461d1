"""URLs of the browser editor, included under /workflows/ by controlplane.urls."""

from __future__ import annotations

from django.urls import path

from workflows import editor_views as views

app_name = "editor"

urlpatterns = [
    path("", views.workflow_list, name="list"),
    path("<slug:slug>/", views.editor_page, name="edit"),
    path("<slug:slug>/diff/", views.diff_page, name="diff"),
    path("<slug:slug>/history/", views.history_page, name="history"),
    path("<slug:slug>/api/versions", views.history_json, name="history-json"),
    path("<slug:slug>/api/versions/<int:number>", views.version_json, name="version"),
    path("<slug:slug>/api/versions/<int:number>/publish", views.publish, name="publish"),
    path("<slug:slug>/api/versions/<int:number>/activate", views.activate, name="activate"),
    path("<slug:slug>/api/validate", views.validate, name="validate"),
    path("<slug:slug>/api/save", views.save, name="save"),
    path("<slug:slug>/api/diff", views.diff_json, name="diff-json"),
    path("<slug:slug>/api/test-runs", views.test_run, name="test-run"),
    path("<slug:slug>/api/runs/<int:run_id>", views.run_state, name="run"),
]
