"""URLs of the MCP servers page, included under /mcp-servers/ by controlplane.urls."""

from __future__ import annotations

from django.urls import path

from workflows.pages import views_mcp

app_name = "mcp"

urlpatterns = [
    path("", views_mcp.servers_page, name="page"),
    path("save/", views_mcp.save_server, name="save"),
    path("<str:name>/refresh/", views_mcp.refresh_server, name="refresh"),
    path("<str:name>/delete/", views_mcp.delete_server, name="delete"),
]
