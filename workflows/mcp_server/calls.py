"""What an MCP tool call does: start a workflow's run, watch it, read runs, decide approvals.

Each function is the REST API's operation behind another door: the same domain functions
(runs.actions and its trace context, runs.search, waits.approvals), the same refusals
(DomainError, whose message names the field). Who may call which tool is decided before, by
the surface, with controlplane.access (catalogue.Tool.action). Links to run pages are made
from `origin`, the scheme and host the client reached /mcp at.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import jsonschema
from django.urls import reverse

from workflows.core.definition import Issue
from workflows.core.graph import APPROVAL
from workflows.core.states import NODE_TERMINAL, RUN_FINISHED, NodeStatus
from workflows.mcp_server.catalogue import Tool
from workflows.runs import actions as runs, tracecontext
from workflows.runs.search import RunSearch
from workflows.store.errors import Invalid, NotFound
from workflows.store.graphs import load_graph
from workflows.store.models import NodeRun, Run, Wait
from workflows.versions import publish as versions
from workflows.waits import approvals

IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,200}")


@dataclass(frozen=True)
class Progress:
    """Where a run is: `done` of `total` nodes ended, `ended` their ids in the order they ended."""

    run_id: int
    status: str
    done: int
    total: int
    ended: tuple[str, ...]

    @property
    def is_finished(self) -> bool:
        return self.status in RUN_FINISHED


def check_arguments(tool: Tool, arguments: dict[str, Any]) -> None:
    """Refuse a fixed tool's arguments that break its schema, naming each field (Invalid)."""
    validator = jsonschema.Draft202012Validator(tool.input_schema)
    issues = [
        Issue(".".join(str(p) for p in error.absolute_path) or "(arguments)", error.message)
        for error in validator.iter_errors(arguments)
    ]
    if issues:
        fields = ", ".join(issue.path for issue in issues)
        raise Invalid(f"The arguments do not match the tool's input schema ({fields}).", issues)


def check_idempotency_key(key: Any) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not IDEMPOTENCY_KEY.fullmatch(key):
        raise Invalid(
            "_meta.idempotencyKey: give 1-200 visible ASCII characters.",
            [Issue("_meta.idempotencyKey", "is not 1-200 visible ASCII characters")],
        )
    return key


def start_workflow_run(
    slug: str,
    arguments: dict[str, Any],
    idempotency_key: str | None,
    api_key_id: int | None,
    traceparent: str | None,
) -> tuple[Run, bool]:
    """Start a run of the workflow's active version, as POST /workflows/{slug}/runs does."""
    options = {"idempotency_key": idempotency_key, "as_read": True, "api_key_id": api_key_id}
    try:
        workflow = versions.get_workflow_to_start(slug, cached=True)
        return tracecontext.start_run(workflow, arguments, traceparent, **options)
    except runs.StaleWorkflow:  # published since this process cached it
        workflow = versions.get_workflow_to_start(slug)
        return tracecontext.start_run(workflow, arguments, traceparent, **options)


def progress_of(run_id: int) -> Progress:
    """Read where the run is: its status and which of its nodes have ended."""
    run = Run.objects.only("status", "version_id").get(pk=run_id)
    total = len(load_graph(run.version_id).order)
    rows = NodeRun.objects.filter(run_id=run_id, status__in=NODE_TERMINAL).order_by("finished_at", "id")
    ended = tuple(rows.values_list("node_id", flat=True))
    return Progress(run_id, run.status, len(ended), total, ended)


def run_link(run_id: int, origin: str) -> str:
    return origin + reverse("run_detail", args=[run_id])


def run_report(run_id: int, origin: str) -> dict[str, Any]:
    """Read a run for a client: status, each node's status and error, output, approvals, link."""
    run = runs.get_run(run_id)
    nodes = list(NodeRun.objects.filter(run_id=run_id).order_by("id"))
    dead = [n for n in nodes if n.status == NodeStatus.DEAD]
    return {
        "run_id": run.pk,
        "workflow": run.workflow.slug,
        "version": run.version.number,
        "status": run.status,
        "created_at": run.created_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "output": runs.run_output(run) if run.status == "succeeded" else None,
        "error": "; ".join(f"{n.node_id}: {n.error}" for n in dead) or None,
        "nodes": [
            {"node_id": n.node_id, "status": n.status, "attempt": n.attempt, "error": n.error or None}
            for n in nodes
        ],
        "approvals": [
            {"approval_id": w.pk, "node_id": w.node_id}
            for w in Wait.objects.filter(run_id=run_id, kind=APPROVAL, closed_at__isnull=True).order_by("id")
        ],
        "url": run_link(run.pk, origin),
    }


def list_runs(arguments: dict[str, Any], origin: str) -> dict[str, Any]:
    """List runs, newest first, as GET /runs does with its workflow, status and limit filters."""
    search = RunSearch(status=arguments.get("status", ""), workflow=arguments.get("workflow", ""))
    limit = int(arguments.get("limit", 20))
    rows = search.apply(Run.objects.select_related("workflow", "version")).order_by("-id")[:limit]
    return {
        "runs": [
            {
                "run_id": r.pk,
                "workflow": r.workflow.slug,
                "version": r.version.number,
                "status": r.status,
                "created_at": r.created_at.isoformat(),
                "finished_at": r.finished_at.isoformat() if r.finished_at else None,
                "url": run_link(r.pk, origin),
            }
            for r in rows
        ]
    }


def find_approval(arguments: dict[str, Any]) -> int:
    """Return the approval the arguments name: its id, or the one its run (and node) waits on."""
    if "approval_id" in arguments:
        return int(arguments["approval_id"])
    if "run_id" not in arguments:
        message = "give approval_id, or run_id (and node_id)"
        raise Invalid(f"approval_id: {message}.", [Issue("approval_id", message)])
    waits = Wait.objects.filter(run_id=arguments["run_id"], kind=APPROVAL, closed_at__isnull=True)
    if "node_id" in arguments:
        waits = waits.filter(node_id=arguments["node_id"])
    found = list(waits.order_by("id").values_list("pk", "node_id"))
    if not found:
        raise NotFound(
            f"Run {arguments['run_id']} waits on no approval{' at that node' * ('node_id' in arguments)}."
        )
    if len(found) > 1:
        nodes = ", ".join(node for _, node in found)
        message = f"the run waits on approvals at {nodes}: name one"
        raise Invalid(f"node_id: {message}.", [Issue("node_id", message)])
    return int(found[0][0])


def decide_approval(person: Any, arguments: dict[str, Any], origin: str) -> dict[str, Any]:
    """Approve or reject, as POST /approvals/{id}/decide does (the same checks of who may)."""
    approval_id = find_approval(arguments)
    decision, comment = arguments["decision"], arguments.get("comment", "")
    wait = approvals.decide(approval_id, person, decision, None, comment, None, via="mcp")
    wait.refresh_from_db()
    return {
        "approval_id": wait.pk,
        "run_id": wait.run_id,
        "node_id": wait.node_id,
        "decision": decision,
        "outcome": wait.outcome,
        "run_url": run_link(wait.run_id, origin),
    }
