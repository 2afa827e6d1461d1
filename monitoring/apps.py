from __future__ import annotations

from django.apps import AppConfig


class MonitoringConfig(AppConfig):
    name = "monitoring"
