from __future__ import annotations

from django.apps import AppConfig
from django.conf import settings


class WorkflowsConfig(AppConfig):
    name = "workflows"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        import controlplane.checks  # noqa: F401  (registers the checks)
        from workflows.handlers import load_handler_modules

        load_handler_modules(
            [
                "workflows.handlers.waits",
                "workflows.llm.handler",
                "workflows.handlers.agent",
                "workflows.handlers.children",
                *settings.SWITCHYARD["HANDLER_MODULES"],
            ]
        )
