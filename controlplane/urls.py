from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic.base import RedirectView

from monitoring.views import overview as monitoring_views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include("workflows.api.urls")),
    path("workflows/", include("workflows.pages.urls")),
    path("llm/", include("workflows.pages.urls_llm")),
    path("budgets/", include("workflows.pages.urls_budgets")),
    path("providers/", include("workflows.pages.urls_providers")),
    path("secrets/", include("workflows.pages.urls_secrets")),
    path("mcp-servers/", include("workflows.pages.urls_mcp")),
    path("", include("workflows.pages.urls_events")),
    path("", include("workflows.pages.urls_suites")),
    path("healthz", monitoring_views.liveness, name="liveness"),
    # Browsers and pages without a <link rel="icon"> (the admin) ask for /favicon.ico.
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True), name="favicon"),
    path("accounts/login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("monitoring.urls")),
]

handler500 = "controlplane.errorpages.server_error"
