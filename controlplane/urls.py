from __future__ import annotations

from django.contrib import admin
from django.urls import path

from monitoring import views as monitoring_views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", monitoring_views.liveness, name="liveness"),
]
