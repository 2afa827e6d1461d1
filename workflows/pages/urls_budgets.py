"""URLs of the budgets page, included under /budgets/ by controlplane.urls."""

from __future__ import annotations

from django.urls import path

from workflows.pages import views_budgets

app_name = "budgets"

urlpatterns = [
    path("", views_budgets.budgets_page, name="page"),
    path("save/", views_budgets.save_budget, name="save"),
    path("<int:budget_id>/delete/", views_budgets.delete_budget, name="delete"),
    path("holds/<int:hold_id>/allow/", views_budgets.allow_hold, name="allow"),
]
