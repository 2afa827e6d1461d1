"""Websocket routes of the dashboard (mounted by controlplane/asgi.py)."""

from __future__ import annotations

from django.urls import path

from monitoring.consumers import MonitorConsumer

websocket_urlpatterns = [path("ws/monitor/", MonitorConsumer.as_asgi())]
