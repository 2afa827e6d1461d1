from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from workflows.runs import actions as runs
from workflows.store.errors import DomainError
from workflows.store.models import Run
from workflows.versions import publish as versions

TERMINAL_RUN = {"succeeded", "failed", "cancelled"}


class Command(BaseCommand):
    help = "Start, show, cancel runs and replay dead letters."

    def add_arguments(self, parser: Any) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        start = sub.add_parser("start", help="Start a run of a workflow's active version.")
        start.add_argument("slug")
        start.add_argument("--input", default="{}", help="Run input as a JSON object.")
        start.add_argument("--idempotency-key")
        start.add_argument("--priority", type=int, help="-100..100, higher first (default: the workflow's).")
        start.add_argument("--wait", type=float, default=0, help="Seconds to wait for the run to finish.")
        batch = sub.add_parser(
            "start-batch",
            help="Start many runs, in batches of up to 1,000 (each one transaction, all-or-nothing).",
        )
        batch.add_argument("slug")
        source = batch.add_mutually_exclusive_group(required=True)
        source.add_argument("--count", type=int, help="Start this many runs of --input.")
        source.add_argument(
            "--inputs-file",
            help='JSON lines, one run each: {"input": {...}, "idempotency_key": "...", "priority": 0} '
            "(only input is needed); - reads standard input.",
        )
        batch.add_argument("--input", default="{}", help="With --count: the runs' input, a JSON object.")
        show = sub.add_parser("show", help="Print a run's state as JSON.")
        show.add_argument("run_id", type=int)
        cancel = sub.add_parser("cancel", help="Cancel a running run.")
        cancel.add_argument("run_id", type=int)
        replay = sub.add_parser("replay", help="Replay a dead letter.")
        replay.add_argument("letter_id", type=int)
        replay.add_argument("--input", help="Edited input for the node, a JSON object (default: as before).")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            getattr(self, f"do_{options['action'].replace('-', '_')}")(options)
        except DomainError as exc:
            raise CommandError(str(exc)) from None

    def do_start(self, options: dict[str, Any]) -> None:
        run_input = json_option(options["input"])
        workflow = versions.get_workflow(options["slug"])
        run, created = runs.start_run(
            workflow, run_input, options["idempotency_key"], priority=options["priority"]
        )
        self.stdout.write(f"run {run.pk} {'started' if created else 'already existed'}")
        deadline = time.monotonic() + options["wait"]
        while options["wait"] and time.monotonic() < deadline:
            run.refresh_from_db(fields=["status"])
            if run.status in TERMINAL_RUN:
                break
            time.sleep(0.05)
        if options["wait"]:
            self.do_show({"run_id": run.pk})

    def do_start_batch(self, options: dict[str, Any]) -> None:
        workflow = versions.get_workflow(options["slug"])
        if options["count"] is not None:
            if options["count"] < 1:
                raise CommandError("--count must be at least 1.")
            items = [runs.StartItem(json_option(options["input"]))] * options["count"]
        else:
            items = read_items(options["inputs_file"])
        created = 0
        for start in range(0, len(items), runs.MAX_BATCH):
            try:
                started = runs.start_runs(workflow, items[start : start + runs.MAX_BATCH])
            except DomainError as exc:
                done = f"{created} runs started before; " if start else ""
                raise CommandError(f"batch from item {start}: {done}{exc}") from None
            created += sum(made for _, made in started)
        self.stdout.write(f"{created} runs started, {len(items) - created} already existed")

    def do_show(self, options: dict[str, Any]) -> None:
        self.stdout.write(json.dumps(describe_run(runs.get_run(options["run_id"])), indent=2, default=str))

    def do_cancel(self, options: dict[str, Any]) -> None:
        run = runs.cancel_run(options["run_id"])
        self.stdout.write(f"run {run.pk} cancelled")

    def do_replay(self, options: dict[str, Any]) -> None:
        edited = None if options["input"] is None else json_option(options["input"])
        run = runs.replay_dead_letter(options["letter_id"], edited_input=edited)
        self.stdout.write(f"dead letter {options['letter_id']} replayed; run {run.pk} is running again")


def json_option(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(f"--input is not JSON: {exc}") from None


def read_items(path: str) -> list[runs.StartItem]:
    """Read a JSON-lines file of start items (blank lines skipped), naming the line of a bad one."""
    text = sys.stdin.read() if path == "-" else Path(path).read_text()
    items = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CommandError(f"line {number} is not JSON: {exc}") from None
        if not isinstance(item, dict) or set(item) - {"input", "idempotency_key", "priority"}:
            raise CommandError(
                f'line {number}: expected {{"input": ..., "idempotency_key": ..., "priority": ...}}'
            )
        items.append(runs.StartItem(item.get("input", {}), item.get("idempotency_key"), item.get("priority")))
    return items


def describe_run(run: Run) -> dict[str, Any]:
    return {
        "id": run.pk,
        "workflow": run.workflow.slug,
        "version": run.version.number,
        "status": run.status,
        "priority": run.priority,
        "input": run.input,
        "created_at": run.created_at,
        "finished_at": run.finished_at,
        "nodes": {
            n.node_id: {
                "status": n.status,
                "attempt": n.attempt,
                "worker": n.worker,
                "started_at": n.started_at,
                "finished_at": n.finished_at,
                "output": n.output,
                "error": n.error,
            }
            for n in run.nodes.all()
        },
    }
