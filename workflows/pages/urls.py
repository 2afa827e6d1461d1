"""URLs of the workflow pages, included under /workflows/ by controlplane.urls."""

from __future__ import annotations

from django.urls import path

from workflows.pages import views

app_name = "editor"

urlpatterns = [
    path("", views.workflow_list, name="list"),
    path("<slug:slug>/", views.editor_page, name="edit"),
    path("<slug:slug>/diff/", views.diff_page, name="diff"),
    path("<slug:slug>/history/", views.history_page, name="history"),
    path("<slug:slug>/versions/<int:number>/graph.<str:ext>", views.graph_download, name="graph"),
]
