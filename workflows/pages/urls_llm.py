"""URLs of the LLM page (providers, prices, usage), included under /llm/ by controlplane.urls."""

from __future__ import annotations

from django.urls import path

from workflows.pages import views_llm

app_name = "llm"

urlpatterns = [
    path("", views_llm.llm_page, name="page"),
    path("usage/", views_llm.usage_card, name="usage"),
    path("providers/", views_llm.save_provider, name="save_provider"),
    path("providers/<slug:name>/delete/", views_llm.delete_provider, name="delete_provider"),
    path("prices/", views_llm.save_price, name="save_price"),
    path("prices/delete/", views_llm.delete_price, name="delete_price"),
]
