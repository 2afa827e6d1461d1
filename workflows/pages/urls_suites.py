"""URLs of the suites pages (a workflow's suites, one suite, a suite run's report), included at the
root by controlplane.urls."""

from __future__ import annotations

from django.urls import path

from workflows.pages import views_suites

app_name = "suites"

urlpatterns = [
    path("workflows/<slug:slug>/suites/", views_suites.suites_page, name="list"),
    path("workflows/<slug:slug>/suites/<int:suite_id>/", views_suites.suite_page, name="detail"),
    path("workflows/<slug:slug>/suites/<int:suite_id>/cases/", views_suites.add_cases, name="add_cases"),
    path("workflows/<slug:slug>/suites/<int:suite_id>/required/", views_suites.require_suite, name="require"),
    path("workflows/<slug:slug>/suites/<int:suite_id>/runs/", views_suites.run_suite, name="run"),
    path("suite-runs/<int:suite_run_id>/", views_suites.report_page, name="report"),
]
