"""URLs of the provider health page, included under /providers/ by controlplane.urls."""

from __future__ import annotations

from django.urls import path

from workflows.pages import views_providers

app_name = "providers"

urlpatterns = [
    path("health/", views_providers.health_page, name="health"),
    path("health/<slug:name>/force/", views_providers.force_breaker, name="force"),
    path("health/<slug:name>/limits/", views_providers.save_limits, name="limits"),
]
