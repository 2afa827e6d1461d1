from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from workflows.store.errors import DomainError
from workflows.store.models import Workflow, WorkflowVersion
from workflows.versions import publish as versions


class Command(BaseCommand):
    help = "Manage workflows: list, import, export, publish, activate."

    def add_arguments(self, parser: Any) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("list", help="List workflows and their active version.")
        imp = sub.add_parser("import", help="Import a workflow export (JSON file, or - for stdin).")
        imp.add_argument("file")
        imp.add_argument("--publish", action="store_true", help="Publish and activate the new version.")
        exp = sub.add_parser("export", help="Print a workflow's version as JSON.")
        exp.add_argument("slug")
        exp.add_argument("--version", type=int, help="Version number (default: the active one).")
        for name, text in (
            ("publish", "Publish a draft and activate it."),
            ("activate", "Activate a version."),
        ):
            p = sub.add_parser(name, help=text)
            p.add_argument("slug")
            p.add_argument("version", type=int)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            getattr(self, f"do_{options['action']}")(options)
        except DomainError as exc:
            raise CommandError(str(exc)) from None

    def do_list(self, options: dict[str, Any]) -> None:
        for wf in Workflow.objects.select_related("active_version"):
            active = f"v{wf.active_version.number}" if wf.active_version else "no active version"
            self.stdout.write(f"{wf.slug}\t{active}\t{wf.title}")

    def do_import(self, options: dict[str, Any]) -> None:
        stream = sys.stdin if options["file"] == "-" else open(options["file"], encoding="utf-8")  # noqa: SIM115
        with stream:
            try:
                data = json.load(stream)
            except json.JSONDecodeError as exc:
                raise CommandError(f"{options['file']} is not JSON: {exc}") from None
        version = versions.import_workflow(data, publish=options["publish"])
        self.stdout.write(f"{version.workflow.slug} v{version.number} ({version.status})")

    def do_export(self, options: dict[str, Any]) -> None:
        workflow = versions.get_workflow(options["slug"])
        version = self.version(workflow, options["version"]) if options["version"] else None
        self.stdout.write(json.dumps(versions.export_workflow(workflow, version), indent=2))

    def do_publish(self, options: dict[str, Any]) -> None:
        version = versions.publish_version(
            self.version(versions.get_workflow(options["slug"]), options["version"])
        )
        self.stdout.write(f"published and activated {options['slug']} v{version.number}")

    def do_activate(self, options: dict[str, Any]) -> None:
        versions.activate_version(self.version(versions.get_workflow(options["slug"]), options["version"]))
        self.stdout.write(f"activated {options['slug']} v{options['version']}")

    def version(self, workflow: Workflow, number: int) -> WorkflowVersion:
        try:
            return workflow.versions.get(number=number)
        except WorkflowVersion.DoesNotExist:
            raise CommandError(f"{workflow.slug} has no version {number}.") from None
