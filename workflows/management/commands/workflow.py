from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from workflows.core import callhash
from workflows.store.errors import DomainError
from workflows.store.models import Workflow, WorkflowVersion
from workflows.store.suites import SuiteCaseRun, SuiteRun
from workflows.suites import building, junit, reports, running
from workflows.versions import publish as versions


class Command(BaseCommand):
    help = "Manage workflows: list, import, export, publish, activate, test (run a regression suite)."

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
        add_test_parser(sub)

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

    def do_test(self, options: dict[str, Any]) -> None:
        """Run a suite, wait, print a summary; exit 0 only if every case passed (1: failures, 2: timed out)."""
        workflow = versions.get_workflow(options["slug"])
        suite = building.get_suite(workflow, options["suite"])
        started = running.start_suite_run(suite, options["version"], options["draft"], options["mode"])
        self.stdout.write(
            f"suite {suite.name!r}: {suite.cases.count()} cases on {target(started)} (suite run {started.pk})"
        )
        found = reports.wait_for_report(started.pk, options["timeout"])
        for case in found.cases:
            self.stdout.write(case_line(case))
        if options["junit"]:
            with open(options["junit"], "wb") as out:
                out.write(junit.junit_xml(found))
        cost = f", cost {found.cost}" if found.cost is not None else ""
        if found.state == "running":
            raise CommandError(
                f"timed out after {options['timeout']:g} s: {found.ended} of {len(found.cases)} cases ended.",
                returncode=2,
            )
        self.stdout.write(
            f"{len(found.cases) - len(found.failing)} passed, {len(found.failing)} failed{cost}"
        )
        if found.failing:
            raise CommandError(f"{len(found.failing)} of {len(found.cases)} cases failed.", returncode=1)

    def version(self, workflow: Workflow, number: int) -> WorkflowVersion:
        try:
            return workflow.versions.get(number=number)
        except WorkflowVersion.DoesNotExist:
            raise CommandError(f"{workflow.slug} has no version {number}.") from None


def add_test_parser(sub: Any) -> None:
    test = sub.add_parser(
        "test", help="Run a regression suite against a draft or a version and wait (exit 0 only if all pass)."
    )
    test.add_argument("slug")
    test.add_argument("--suite", required=True, help="The suite's name.")
    which = test.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--draft", action="store_true", help="Test the newest draft (frozen as a snapshot first)."
    )
    which.add_argument("--version", type=int, help="Test version N (a published version or a draft).")
    test.add_argument(
        "--mode",
        choices=callhash.MODES,
        help="How cases with an origin make their calls (default recorded-then-live).",
    )
    test.add_argument("--junit", metavar="FILE", help="Write the result as JUnit XML to FILE.")
    test.add_argument(
        "--timeout", type=float, default=600.0, help="Seconds to wait for the cases (default 600)."
    )


def target(suite_run: SuiteRun) -> str:
    if suite_run.draft is not None:
        return f"draft v{suite_run.draft.number} (snapshot v{suite_run.version.number})"
    return f"v{suite_run.version.number}"


def case_line(case: SuiteCaseRun) -> str:
    mark = {True: "PASS", False: "FAIL", None: "...."}[case.passed]
    changed = f" changed: {', '.join(case.changed)}" if case.changed else ""
    why = "" if case.passed is not False else " -- " + reports.failure_message(case).replace("\n", "; ")
    return f"{mark} {case.case_name} (run {case.run_id}){changed}{why}"
