"""`manage.py bootstrap`: the admin login and the demo workflows (`make run` calls it).

A demo that exists already is left alone, except that a new version is published when its
shipped definition changed (a demo declaring its input schema, say) and its active version is
still one this command published (comment "demo", no author): a person's edits are never
replaced.
"""

from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from workflows.core.definition import checksum
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
            said = ensure_demo(slug, title, definition)
            if said:
                self.stdout.write(f"{said} demo workflow {slug}")


DEMO_COMMENT = "demo"


def ensure_demo(slug: str, title: str, definition: dict[str, Any]) -> str:
    """Create a demo, or bring one this command published up to date; say what was done ("" for nothing)."""
    workflow = Workflow.objects.filter(slug=slug).select_related("active_version").first()
    if workflow is None:
        workflow = versions.create_workflow(slug, title, definition.get("description", ""))
        versions.publish_version(versions.create_version(workflow, definition, comment=DEMO_COMMENT))
        return "Created"
    active = workflow.active_version
    if active is None or active.comment != DEMO_COMMENT or active.created_by_id is not None:
        return ""
    if active.checksum == checksum(definition):
        return ""
    versions.publish_version(versions.create_version(workflow, definition, comment=DEMO_COMMENT))
    return "Updated"
