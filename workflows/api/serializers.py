"""What the API answers: plain functions from models to dicts, typed as TypedDicts.

The TypedDicts are the response schemas of the OpenAPI document (pydantic turns them into
JSON Schema). `make lint` runs mypy --strict on this module: a serializer's dict is checked
against its TypedDict (keys, and values where the model field is typed), except in `run`
(built as a plain dict, then given the optional LLM keys) and `definition_check` (rows from
`as_dict()`), which carry a `type: ignore` each; JSON fields (Any) are not checked. Datetimes
stay datetimes here; the JSON encoder writes them as RFC 3339.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NotRequired

from typing_extensions import TypedDict

from workflows.api.errors import definition_error
from workflows.core.definition import Issue
from workflows.handlers.registry import Handler
from workflows.runs.waiting import WaitingFor
from workflows.runtime.parents import Family
from workflows.store.forks import RunFork
from workflows.store.models import (
    ApiKey,
    ChildRun,
    DeadLetter,
    NodeRun,
    Run,
    RunEvent,
    Trigger,
    WebhookDelivery,
    WebhookSubscription,
    Workflow,
    WorkflowVersion,
)
from workflows.versions import drafts, editing

API = "/api/v1"


# --------------------------------------------------------------------------- shapes


# "in" is a Python keyword: the functional syntax names it. An error about a definition
# also carries the core's structured problem (Issue.as_problem): code, node, field, cycle.
ProblemError = TypedDict(
    "ProblemError",
    {
        "in": str,
        "path": str,
        "message": str,
        "code": NotRequired[str],
        "node": NotRequired[str | None],
        "field": NotRequired[str],
        "cycle": NotRequired[list[str]],
        "input_field": NotRequired[str],
    },
)


class WorkflowOut(TypedDict):
    slug: str
    title: str
    description: str
    paused: bool
    default_priority: int
    active_version: int | None
    created_at: datetime
    updated_at: datetime
    url: str


class VersionSummary(TypedDict):
    id: int
    workflow: str
    number: int
    status: str
    checksum: str
    revision: int
    etag: str
    comment: str
    active: bool
    created_by: str | None
    created_at: datetime
    published_at: datetime | None
    nodes: int
    test_snapshot: bool
    url: str


class VersionOut(VersionSummary):
    definition: dict[str, Any]


class Problem(TypedDict):
    type: str
    title: str
    status: int
    detail: str
    instance: str
    errors: list[ProblemError]
    current: NotRequired[VersionOut]


class RunSummary(TypedDict):
    id: int
    workflow: str
    version: int
    version_id: int
    # The version is the frozen copy of a draft made for a test run (not a release): "v7 (test)".
    test_version: bool
    # Started from the editor's Test run: left out of the lists unless `include_tests`.
    test_run: bool
    status: str
    idempotency_key: str | None
    priority: int
    created_at: datetime
    finished_at: datetime | None
    url: str


class LLMUsageOut(TypedDict):
    calls: int
    input_tokens: int
    output_tokens: int
    cost: str | None  # null: no call had a price (unknown), never 0
    unpriced_calls: int


class NodeOut(TypedDict):
    node_id: str
    status: str
    attempt: int
    tries: int
    queue: str
    worker: str
    queued_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: float | None
    output: Any
    error: str
    traceback: str
    llm_usage: NotRequired[LLMUsageOut]  # LLM nodes: totals of every call of every attempt
    # A map node's progress (done, failed, running, pending of total); null for other nodes.
    items: dict[str, int] | None


class RunLinkOut(TypedDict):
    """A parent or child run: the run, the workflow.run node and the attempt that started it."""

    run: int
    workflow: str
    status: str
    node_id: str
    attempt: int
    url: str


class ForkOriginOut(TypedDict):
    """What a fork was forked from: the run (null once deleted), its id, the node, what was carried over."""

    run: int | None
    origin_id: int
    node_id: str
    carried: list[str]
    edited_input: dict[str, Any] | None
    calls: str  # live | recorded | recorded-then-live
    url: str | None
    comparison_url: str | None


class ForkLinkOut(TypedDict):
    """A fork of a run: the new run, its fork point, version and status."""

    run: int
    node_id: str
    version: int
    status: str
    url: str
    comparison_url: str


class WaitingForOut(TypedDict):
    """One thing a run waits for (workflows/runs/waiting.py)."""

    what: str  # a decision, an event (its key), a timer, a child run, its workflow's resume
    node_id: str  # the node that waits; empty for a run started while its workflow was paused
    child_run_id: int | None


class RunOut(RunSummary):
    input: dict[str, Any]
    nodes: list[NodeOut]
    dead_letters: list[int]
    llm_usage: NotRequired[LLMUsageOut]
    parent: RunLinkOut | None
    children: list[RunLinkOut]
    # What the run waits for (empty: it does not wait). A running run that waits is found by
    # the list's status=waiting; its `status` stays running (workflows/runs/waiting.py).
    waiting_for: list[WaitingForOut]
    forked_from: ForkOriginOut | None
    forks: list[ForkLinkOut]


class EventOut(TypedDict):
    id: int
    kind: str
    node_id: str
    attempt: int
    at: datetime
    started_at: datetime | None
    worker: str
    data: dict[str, Any]


class SpanOut(TypedDict):
    node_id: str
    attempt: int
    status: str
    worker: str
    start: datetime | None
    end: datetime
    duration_ms: float | None
    error: str


class TraceOut(TypedDict):
    run: int
    spans: list[SpanOut]


class DeadLetterSummary(TypedDict):
    id: int
    run: int
    workflow: str
    node_id: str
    attempt: int
    status: str
    error: str
    created_at: datetime
    resolved_at: datetime | None
    resolved_by: str | None
    reason: str
    url: str


class DeadLetterOut(DeadLetterSummary):
    traceback: str
    input_snapshot: dict[str, Any]
    attempts: list[SpanOut]


class RefusedOut(TypedDict):
    id: int
    reason: str


class BulkOut(TypedDict):
    matched: int
    dry_run: bool
    done: list[int]
    refused: list[RefusedOut]
    sample: list[int]


class HandlerOut(TypedDict):
    name: str
    summary: str
    doc: str
    config_schema: dict[str, Any] | None
    batchable: bool


class IssueOut(TypedDict):
    path: str
    message: str


class ValidationOut(TypedDict):
    valid: bool
    issues: list[IssueOut]


class DefinitionCheck(TypedDict):
    valid: bool
    errors: list[ProblemError]
    # What placeholders name that nothing is sure to provide (core/contracts.template_gaps): not refused.
    warnings: list[ProblemError]


class FieldChangeOut(TypedDict):
    field: str
    old: Any
    new: Any


class NodeChangeOut(TypedDict):
    node_id: str
    changes: list[FieldChangeOut]


class EdgeOut(TypedDict):
    source: str
    target: str


class EdgeChangeOut(EdgeOut):
    changes: list[FieldChangeOut]


class GraphDiffOut(TypedDict):
    nodes_added: list[str]
    nodes_removed: list[str]
    nodes_changed: list[NodeChangeOut]
    edges_added: list[EdgeOut]
    edges_removed: list[EdgeOut]
    edges_changed: list[EdgeChangeOut]


class DiffOut(TypedDict):
    workflow: str
    from_version: int
    to_version: int
    empty: bool
    diff: GraphDiffOut


class ExportOut(TypedDict):
    format: str
    slug: str
    title: str
    description: str
    version: int
    checksum: str
    definition: dict[str, Any]


class ResumeOut(TypedDict):
    workflow: WorkflowOut
    started: int


class KeyOut(TypedDict):
    id: int
    name: str
    owner: str
    prefix: str
    scopes: list[str]
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None


class KeyCreated(KeyOut):
    key: str


class TriggerOut(TypedDict):
    id: str
    workflow: str
    name: str
    active: bool
    priority: int | None
    url: str
    created_at: datetime


class TriggerCreated(TriggerOut):
    secret: str


class SubscriptionOut(TypedDict):
    id: int
    workflow: str
    url: str
    events: list[str]
    active: bool
    created_at: datetime


class SubscriptionCreated(SubscriptionOut):
    secret: str


class DeliveryOut(TypedDict):
    id: int
    subscription: int
    event_id: int
    event_type: str
    status: str
    attempts: int
    next_attempt_at: datetime
    last_attempt_at: datetime | None
    delivered_at: datetime | None
    response_status: int | None
    response_body: str
    error: str
    duration_ms: float | None
    payload: dict[str, Any]
    created_at: datetime


class CheckOut(TypedDict):
    ok: bool
    detail: str


class HealthOut(TypedDict):
    status: str
    checks: dict[str, CheckOut]


class WorkflowPage(TypedDict):
    items: list[WorkflowOut]
    next_cursor: str | None


class VersionList(TypedDict):
    items: list[VersionSummary]


class ListedRun(RunSummary):
    forked_from: int | None  # the run it was forked from (workflows/forks), or null


class RunPage(TypedDict):
    items: list[ListedRun]
    next_cursor: str | None


class EventPage(TypedDict):
    items: list[EventOut]
    next_cursor: str | None


class DeadLetterPage(TypedDict):
    items: list[DeadLetterSummary]
    next_cursor: str | None


class KeyPage(TypedDict):
    items: list[KeyOut]
    next_cursor: str | None


class DeliveryPage(TypedDict):
    items: list[DeliveryOut]
    next_cursor: str | None


class HandlerList(TypedDict):
    items: list[HandlerOut]


class TriggerList(TypedDict):
    items: list[TriggerOut]


class SubscriptionList(TypedDict):
    items: list[SubscriptionOut]


# --------------------------------------------------------------------------- functions


def workflow(wf: Workflow) -> WorkflowOut:
    active = wf.active_version
    return {
        "slug": wf.slug,
        "title": wf.title,
        "description": wf.description,
        "paused": wf.paused,
        "default_priority": wf.default_priority,
        "active_version": active.number if active is not None else None,
        "created_at": wf.created_at,
        "updated_at": wf.updated_at,
        "url": f"{API}/workflows/{wf.slug}",
    }


def version_summary(v: WorkflowVersion) -> VersionSummary:
    slug = v.workflow.slug
    return {
        "id": v.pk,
        "workflow": slug,
        "number": v.number,
        "status": v.status,
        "checksum": v.checksum,
        "revision": v.revision,
        "etag": drafts.etag(v),
        "comment": v.comment,
        "active": v.workflow.active_version_id == v.pk,
        "created_by": v.created_by.username if v.created_by else None,
        "created_at": v.created_at,
        "published_at": v.published_at,
        "nodes": len(v.definition.get("nodes", [])),
        "test_snapshot": editing.is_snapshot(v),
        "url": f"{API}/workflows/{slug}/versions/{v.number}",
    }


def version(v: WorkflowVersion) -> VersionOut:
    return {**version_summary(v), "definition": v.definition}


def run_summary(r: Run) -> RunSummary:
    return {
        "id": r.pk,
        "workflow": r.workflow.slug,
        "version": r.version.number,
        "version_id": r.version_id,
        "test_version": r.version.is_test_version,
        "test_run": r.is_test,
        "status": r.status,
        "idempotency_key": r.idempotency_key,
        "priority": r.priority,
        "created_at": r.created_at,
        "finished_at": r.finished_at,
        "url": f"{API}/runs/{r.pk}",
    }


def listed_run(r: Run) -> ListedRun:
    """A run of a list, read with select_related("fork"): its summary and what it was forked from."""
    try:
        origin: int | None = r.fork.origin_number
    except RunFork.DoesNotExist:
        origin = None
    return {**run_summary(r), "forked_from": origin}


def node(n: NodeRun, items: dict[str, int] | None = None) -> NodeOut:
    return {
        "node_id": n.node_id,
        "status": n.status,
        "attempt": n.attempt,
        "tries": n.tries,
        "queue": n.queue,
        "worker": n.worker,
        "queued_at": n.queued_at,
        "started_at": n.started_at,
        "finished_at": n.finished_at,
        "duration_ms": millis(n.started_at, n.finished_at),
        "output": n.output,
        "error": n.error,
        "traceback": n.traceback,
        "items": items,
    }


def run(
    r: Run,
    nodes: list[NodeRun],
    letters: list[int],
    family: Family,
    llm: dict[str, Any] | None = None,
    progress: dict[int, dict[str, int]] | None = None,
    waiting_for: list[WaitingFor] | None = None,
    fork: RunFork | None = None,
    forks: list[RunFork] | None = None,
) -> RunOut:
    """A run with its parent and children (`family`); `llm` (usage.run_usage) adds the LLM
    usage of the run and of each LLM node, `progress` (mapitems.progress) each map node's
    item counts; `fork` what it was forked from, `forks` its own forks."""
    progress = progress or {}
    out = {
        **run_summary(r),
        "input": r.input,
        "nodes": [node(n, progress.get(n.pk)) for n in nodes],
        "dead_letters": letters,
        "parent": run_link(family.parent, family.parent.parent_run) if family.parent else None,
        "children": [run_link(link, link.child) for link in family.children],
        "waiting_for": [
            {"what": w.what, "node_id": w.node_id, "child_run_id": w.child_run_id} for w in waiting_for or []
        ],
        "forked_from": fork_origin(fork) if fork else None,
        "forks": [fork_link(f) for f in forks or []],
    }
    if llm is not None:
        out["llm_usage"] = llm["run"]
        for item in out["nodes"]:
            if item["node_id"] in llm["nodes"]:
                item["llm_usage"] = llm["nodes"][item["node_id"]]
    return out  # type: ignore[return-value]  # built as a dict, then given the optional llm_usage keys: a RunOut


def comparison_url(a: int, b: int) -> str:
    return f"{API}/runs/{a}/comparison/{b}"


def fork_origin(f: RunFork) -> ForkOriginOut:
    return {
        "run": f.origin_id,
        "origin_id": f.origin_number,
        "node_id": f.node_id,
        "carried": list(f.carried),
        "edited_input": f.edited_input,
        "calls": f.calls,
        "url": f"{API}/runs/{f.origin_id}" if f.origin_id else None,
        "comparison_url": comparison_url(f.origin_id, f.run_id) if f.origin_id else None,
    }


def fork_link(f: RunFork) -> ForkLinkOut:
    return {
        "run": f.run_id,
        "node_id": f.node_id,
        "version": f.run.version.number,
        "status": f.run.status,
        "url": f"{API}/runs/{f.run_id}",
        "comparison_url": comparison_url(f.origin_number, f.run_id),
    }


def run_link(link: ChildRun, other: Run) -> RunLinkOut:
    return {
        "run": other.pk,
        "workflow": other.workflow.slug,
        "status": other.status,
        "node_id": link.node_id,
        "attempt": link.attempt,
        "url": f"{API}/runs/{other.pk}",
    }


def millis(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return round((end - start).total_seconds() * 1000, 3)


def event(e: RunEvent) -> EventOut:
    return {
        "id": e.pk,
        "kind": e.kind,
        "node_id": e.node_id,
        "attempt": e.attempt,
        "at": e.at,
        "started_at": e.started_at,
        "worker": e.worker,
        "data": e.data if isinstance(e.data, dict) else {"value": e.data},
    }


def span(e: RunEvent) -> SpanOut:
    data = e.data if isinstance(e.data, dict) else {}
    return {
        "node_id": e.node_id,
        "attempt": e.attempt,
        "status": str(data.get("status", "")),
        "worker": e.worker,
        "start": e.started_at,
        "end": e.at,
        "duration_ms": millis(e.started_at, e.at),
        "error": str(data.get("error", "")),
    }


def letter_summary(d: DeadLetter) -> DeadLetterSummary:
    return {
        "id": d.pk,
        "run": d.run_id,
        "workflow": d.run.workflow.slug,
        "node_id": d.node_id,
        "attempt": d.attempt,
        "status": d.status,
        "error": d.error,
        "created_at": d.created_at,
        "resolved_at": d.resolved_at,
        "resolved_by": d.resolved_by.username if d.resolved_by else None,
        "reason": d.reason,
        "url": f"{API}/deadletters/{d.pk}",
    }


def letter(d: DeadLetter, attempts: list[RunEvent]) -> DeadLetterOut:
    return {
        **letter_summary(d),
        "traceback": d.traceback,
        "input_snapshot": d.input_snapshot,
        "attempts": [span(e) for e in attempts],
    }


def bulk(result: Any) -> BulkOut:
    return {
        "matched": result.matched,
        "dry_run": result.dry_run,
        "done": result.done,
        "refused": result.refused,
        "sample": result.sample,
    }


def handler(h: Handler) -> HandlerOut:
    return {
        "name": h.name,
        "summary": h.summary(),
        "doc": h.doc,
        "config_schema": h.config_schema,
        "batchable": h.batchable,
    }


def validation(issues: list[Issue]) -> ValidationOut:
    return {"valid": not issues, "issues": [{"path": i.path, "message": i.message} for i in issues]}


def definition_check(issues: list[Issue], warnings: list[Issue]) -> DefinitionCheck:
    errors = [definition_error(i, "definition").as_dict() for i in issues]
    noted = [definition_error(i, "definition").as_dict() for i in warnings]
    return {"valid": not issues, "errors": errors, "warnings": noted}  # type: ignore[typeddict-item]  # as_dict() rows are plain dicts of DefinitionError's keys


def api_key(k: ApiKey) -> KeyOut:
    return {
        "id": k.pk,
        "name": k.name,
        "owner": k.owner.username,
        "prefix": k.prefix,
        "scopes": list(k.scopes),
        "created_at": k.created_at,
        "expires_at": k.expires_at,
        "revoked_at": k.revoked_at,
        "last_used_at": k.last_used_at,
    }


def trigger(t: Trigger) -> TriggerOut:
    return {
        "id": str(t.pk),
        "workflow": t.workflow.slug,
        "name": t.name,
        "active": t.active,
        "priority": t.priority,
        "url": f"{API}/hooks/{t.pk}",
        "created_at": t.created_at,
    }


def subscription(s: WebhookSubscription) -> SubscriptionOut:
    return {
        "id": s.pk,
        "workflow": s.workflow.slug,
        "url": s.url,
        "events": list(s.events),
        "active": s.active,
        "created_at": s.created_at,
    }


def delivery(d: WebhookDelivery) -> DeliveryOut:
    return {
        "id": d.pk,
        "subscription": d.subscription_id,
        "event_id": d.event_id,
        "event_type": d.event_type,
        "status": d.status,
        "attempts": d.attempts,
        "next_attempt_at": d.next_attempt_at,
        "last_attempt_at": d.last_attempt_at,
        "delivered_at": d.delivered_at,
        "response_status": d.response_status,
        "response_body": d.response_body,
        "error": d.error,
        "duration_ms": d.duration_ms,
        "payload": d.payload,
        "created_at": d.created_at,
    }


# --------------------------------------------------------------------------- approvals and events


class ApprovalSummary(TypedDict):
    id: int
    run: int
    workflow: str
    node_id: str
    attempt: int
    title: str
    waiting_since: datetime
    due_at: datetime | None
    expires_at: datetime | None
    overdue: bool
    escalated_at: datetime | None
    users: list[str]
    groups: list[str]
    roles: list[str]
    url: str


class ApprovalOut(ApprovalSummary):
    status: str
    outcome: str
    context: dict[str, Any]
    result: Any


class ApprovalPage(TypedDict):
    items: list[ApprovalSummary]
    next_cursor: str | None


class DecisionLinkOut(TypedDict):
    token: str
    decision: str


class PostedEventOut(TypedDict):
    id: int
    key: str
    woken_runs: list[int]
    retained: bool


def approval_summary(w: Any) -> ApprovalSummary:
    return {
        "id": w.pk,
        "run": w.run_id,
        "workflow": w.workflow.slug,
        "node_id": w.node_id,
        "attempt": w.attempt,
        "title": w.title,
        "waiting_since": w.created_at,
        "due_at": w.due_at,
        "expires_at": w.expires_at,
        "overdue": bool(getattr(w, "overdue", False)),
        "escalated_at": w.escalated_at,
        "users": w.users,
        "groups": w.groups,
        "roles": w.roles,
        "url": f"/api/v1/approvals/{w.pk}",
    }


def approval(w: Any, context: dict[str, Any], now: datetime) -> ApprovalOut:
    summary = approval_summary(w)
    summary["overdue"] = w.closed_at is None and w.due_at is not None and w.due_at < now
    return {
        **summary,
        "status": w.node_run.status,
        "outcome": w.outcome,
        "context": context,
        "result": w.result,
    }


class AttemptOut(SpanOut):
    log: str


def attempt(e: RunEvent) -> AttemptOut:
    data = e.data if isinstance(e.data, dict) else {}
    return {**span(e), "log": str(data.get("log", ""))}


class RerunOut(TypedDict):
    run: RunSummary
    nodes: list[str]


class LetterGroupOut(TypedDict):
    workflow: str
    node_id: str
    signature: str
    count: int
    first_seen: datetime
    last_seen: datetime
    latest: int


# --------------------------------------------------------------------------- starts in bulk


class BatchRunOut(RunSummary):
    created: bool  # false: its idempotency key answered the run started before


class BatchOut(TypedDict):
    created: int
    existing: int
    items: list[BatchRunOut]


def batch(started: list[tuple[Run, bool]]) -> BatchOut:
    items = [BatchRunOut(**run_summary(run), created=created) for run, created in started]
    made = sum(created for _, created in started)
    return {"created": made, "existing": len(started) - made, "items": items}
