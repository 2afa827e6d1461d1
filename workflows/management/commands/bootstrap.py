from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from workflows.handlers.demo import DEMO_WORKFLOWS
from workflows.llm import demo_server, providers
from workflows.store.models import Workflow
from workflows.versions import publish as versions


class Command(BaseCommand):
    help = "Create the admin login (password printed once) and the demo workflows; idempotent."

    def handle(self, *args: Any, **options: Any) -> None:
        user_model = get_user_model()
        if not user_model.objects.filter(is_superuser=True).exists():
            password = secrets.token_urlsafe(12)
            user_model.objects.create_superuser("admin", "admin@localhost", password)
            self.stdout.write(f"Admin login: admin / {password}  (shown once; change it in the admin)")
        if settings.SWITCHYARD["DEMO_LLM_URL"]:
            providers.register_demo(settings.SWITCHYARD["DEMO_LLM_URL"], demo_server.MODEL)
            self.stdout.write(f"LLM provider demo: {providers.DEMO_LABEL}")
        for slug, (title, definition) in DEMO_WORKFLOWS.items():
            if Workflow.objects.filter(slug=slug).exists():
                continue
            workflow = versions.create_workflow(slug, title, definition.get("description", ""))
            versions.publish_version(versions.create_version(workflow, definition, comment="demo"))
            self.stdout.write(f"Created demo workflow {slug}")
