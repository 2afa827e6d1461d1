"""URLs of the secrets page, included under /secrets/ by controlplane.urls."""

from __future__ import annotations

from django.urls import path

from workflows.pages import views_secrets

app_name = "secrets"

urlpatterns = [
    path("", views_secrets.secrets_page, name="page"),
    path("save/", views_secrets.save_secret, name="save"),
    path("<str:name>/delete/", views_secrets.delete_secret, name="delete"),
]
