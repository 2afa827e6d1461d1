"""Every endpoint of /api/v1/, once: the URLconf (urls.py) and the OpenAPI document
(openapi.py) are both generated from this table."""

from __future__ import annotations

from workflows.api import inputs as i
from workflows.api import openapi
from workflows.api import serializers as s
from workflows.api import views_deadletters as dead
from workflows.api import views_health as health
from workflows.api import views_hooks as hooks
from workflows.api import views_keys as keys
from workflows.api import views_runs as runs
from workflows.api import views_versions as versions
from workflows.api import views_workflows as workflows
from workflows.api.routing import Header, Op, Route

IDEMPOTENCY_KEY = Header(
    "Idempotency-Key",
    "Any string you choose (1-200 visible ASCII characters). The same key and input answer the "
    "run made the first time; the same key with another input is refused (409).",
)
IF_MATCH = Header(
    "If-Match",
    'The ETag of the version as you read it, like "12-3" (or * to overwrite whatever is there).',
    pattern=r'\*|"[0-9]{1,18}-[0-9]{1,9}"',
    rule='must be the ETag of the version as read, like "12-3", or *',
    required=True,
    missing_status=428,
)
HOOK_HEADERS = (
    Header(
        "X-Switchyard-Timestamp",
        "When the delivery was signed, in Unix seconds.",
        pattern="[0-9]{1,12}",
        rule="must be Unix seconds",
        required=True,
    ),
    Header(
        "X-Switchyard-Delivery",
        "The delivery's id, unique per delivery: a delivery sent again starts no second run.",
        max_length=150,
        pattern="[A-Za-z0-9._:-]{1,150}",
        rule="must be 1 to 150 letters, digits, '.', '_', ':' or '-'",
        required=True,
    ),
    Header(
        "X-Switchyard-Signature",
        "sha256=<hex HMAC-SHA256 of '<timestamp>.<raw body>' keyed with the trigger's secret>",
        pattern="sha256=[0-9a-f]{64}",
        rule="must be sha256= and 64 lowercase hex digits",
        required=True,
    ),
)

WF, VER, RUN, DLQ, KEY, HOOK, META = (
    "workflows",
    "versions",
    "runs",
    "dead letters",
    "api keys",
    "webhooks",
    "health and schema",
)

# fmt: off
ROUTES: list[Route] = [
    # ------------------------------------------------------------------ workflows
    Route("workflows", "workflows", (
        Op("GET", workflows.list_workflows, "List workflows", WF, "view", {200: s.WorkflowPage}, query=i.WorkflowQuery),
        Op("POST", workflows.create_workflow, "Create a workflow", WF, "edit", {201: s.WorkflowOut},
           body=i.WorkflowCreate, errors=(409,)),
    )),
    Route("workflows/<slug:slug>", "workflow", (
        Op("GET", workflows.get_workflow, "Read a workflow", WF, "view", {200: s.WorkflowOut}, errors=(404,)),
        Op("PATCH", workflows.update_workflow, "Update a workflow's title or description", WF, "edit",
           {200: s.WorkflowOut}, body=i.WorkflowUpdate, errors=(404,)),
        Op("DELETE", workflows.delete_workflow, "Delete a workflow", WF, "delete_workflow", {204: None},
           errors=(404, 409)),
    )),
    Route("workflows/<slug:slug>/pause", "workflow-pause", (
        Op("POST", workflows.pause_workflow, "Pause a workflow", WF, "pause_workflow", {200: s.WorkflowOut},
           errors=(404,)),
    )),
    Route("workflows/<slug:slug>/resume", "workflow-resume", (
        Op("POST", workflows.resume_workflow, "Resume a workflow", WF, "pause_workflow", {200: s.ResumeOut},
           errors=(404,)),
    )),
    Route("workflows/<slug:slug>/export", "workflow-export", (
        Op("GET", workflows.export_workflow, "Export a workflow", WF, "view", {200: s.ExportOut},
           query=i.ExportQuery, errors=(404,)),
    )),
    Route("workflow-imports", "workflow-imports", (
        Op("POST", workflows.import_workflow, "Import a workflow export", WF, "edit", {201: s.VersionOut},
           body=i.ImportIn, query=i.ImportQuery, errors=(409,)),
    )),
    # ------------------------------------------------------------------ versions
    Route("workflows/<slug:slug>/versions", "versions", (
        Op("GET", versions.list_versions, "List a workflow's versions", VER, "view", {200: s.VersionList},
           errors=(404,)),
        Op("POST", versions.create_version, "Create a draft version", VER, "edit", {201: s.VersionOut},
           body=i.DraftCreate, errors=(404,)),
    )),
    Route("workflows/<slug:slug>/versions/<id:number>", "version", (
        Op("GET", versions.read_version, "Read a version", VER, "view", {200: s.VersionOut}, errors=(404,)),
        Op("PUT", versions.update_version, "Update a draft (optimistic concurrency)", VER, "edit",
           {200: s.VersionOut}, body=i.DraftUpdate, headers=(IF_MATCH,), errors=(404, 409, 412, 428)),
    )),
    Route("workflows/<slug:slug>/versions/<id:number>/publish", "version-publish", (
        Op("POST", versions.publish_version, "Publish a draft", VER, "publish", {200: s.VersionOut},
           body=i.PublishIn, errors=(404, 409)),
    )),
    Route("workflows/<slug:slug>/versions/<id:number>/activate", "version-activate", (
        Op("POST", versions.activate_version, "Activate a published version (roll back)", VER, "publish",
           {200: s.VersionOut}, errors=(404, 409)),
    )),
    Route("workflows/<slug:slug>/diff", "version-diff", (
        Op("GET", versions.diff_versions, "Diff two versions", VER, "view", {200: s.DiffOut},
           query=i.DiffQuery, errors=(404,)),
    )),
    Route("definitions/validate", "definition-validate", (
        Op("POST", versions.validate, "Validate a definition without saving it", VER, "edit",
           {200: s.ValidationOut}, body=i.ValidateIn),
    )),
    Route("handlers", "handlers", (
        Op("GET", versions.list_handlers, "List node handlers", VER, "view", {200: s.HandlerList}),
    )),
    # ------------------------------------------------------------------ runs
    Route("workflows/<slug:slug>/runs", "workflow-runs", (
        Op("POST", runs.start_run, "Start a run", RUN, "start_run", {201: s.RunSummary, 200: s.RunSummary},
           body=i.StartRunIn, headers=(IDEMPOTENCY_KEY,), errors=(404, 409)),
    )),
    Route("runs", "runs", (
        Op("GET", runs.list_runs, "List runs", RUN, "view", {200: s.RunPage}, query=i.RunQuery),
    )),
    Route("runs/<id:run_id>", "run", (
        Op("GET", runs.get_run, "Read a run with every node", RUN, "view", {200: s.RunOut}, errors=(404,)),
    )),
    Route("runs/<id:run_id>/cancel", "run-cancel", (
        Op("POST", runs.cancel_run, "Cancel a run", RUN, "cancel_run", {200: s.RunSummary}, body=i.CancelIn,
           errors=(404, 409)),
    )),
    Route("runs/<id:run_id>/events", "run-events", (
        Op("GET", runs.run_events, "Read a run's history", RUN, "view", {200: s.EventPage}, query=i.EventQuery,
           errors=(404,)),
    )),
    Route("runs/<id:run_id>/trace", "run-trace", (
        Op("GET", runs.run_trace, "Read a run's trace (spans)", RUN, "view", {200: s.TraceOut}, errors=(404,)),
    )),
    # ------------------------------------------------------------------ dead letters
    Route("deadletters", "deadletters", (
        Op("GET", dead.list_letters, "List dead letters", DLQ, "view", {200: s.DeadLetterPage},
           query=i.LetterQuery),
    )),
    Route("deadletters/replay", "deadletters-replay", (
        Op("POST", dead.replay_many, "Replay dead letters by filter", DLQ, "replay", {200: s.BulkOut},
           body=i.BulkReplayIn),
    )),
    Route("deadletters/discard", "deadletters-discard", (
        Op("POST", dead.discard_many, "Discard dead letters by filter", DLQ, "discard", {200: s.BulkOut},
           body=i.BulkDiscardIn),
    )),
    Route("deadletters/<id:letter_id>", "deadletter", (
        Op("GET", dead.read_letter, "Read a dead letter", DLQ, "view", {200: s.DeadLetterOut}, errors=(404,)),
    )),
    Route("deadletters/<id:letter_id>/replay", "deadletter-replay", (
        Op("POST", dead.replay_letter, "Replay a dead letter", DLQ, "replay", {200: s.RunSummary},
           body=i.ReplayIn, errors=(404, 409)),
    )),
    Route("deadletters/<id:letter_id>/discard", "deadletter-discard", (
        Op("POST", dead.discard_letter, "Discard a dead letter", DLQ, "discard", {200: s.DeadLetterSummary},
           body=i.DiscardIn, errors=(404, 409)),
    )),
    # ------------------------------------------------------------------ api keys
    Route("keys", "keys", (
        Op("GET", keys.list_keys, "List API keys", KEY, "manage_keys", {200: s.KeyPage}, query=i.Page),
        Op("POST", keys.create_key, "Create an API key", KEY, "manage_keys", {201: s.KeyCreated},
           body=i.KeyCreate),
    )),
    Route("keys/<id:key_id>", "key", (
        Op("GET", keys.read_key, "Read an API key", KEY, "manage_keys", {200: s.KeyOut}, errors=(404,)),
        Op("DELETE", keys.revoke_key, "Revoke an API key", KEY, "manage_keys", {200: s.KeyOut},
           errors=(404, 409)),
    )),
    # ------------------------------------------------------------------ webhooks
    Route("workflows/<slug:slug>/triggers", "triggers", (
        Op("GET", hooks.list_triggers, "List inbound triggers", HOOK, "manage_webhooks", {200: s.TriggerList},
           errors=(404,)),
        Op("POST", hooks.create_trigger, "Create an inbound trigger", HOOK, "manage_webhooks",
           {201: s.TriggerCreated}, body=i.TriggerCreate, errors=(404,)),
    )),
    Route("triggers/<uuid:trigger_id>", "trigger", (
        Op("DELETE", hooks.delete_trigger, "Delete an inbound trigger", HOOK, "manage_webhooks", {204: None},
           errors=(404,)),
    )),
    Route("hooks/<uuid:trigger_id>", "hook", (
        Op("POST", hooks.receive, "Start a run from a signed delivery", HOOK, None,
           {201: s.RunSummary, 200: s.RunSummary}, body=i.HookInput, headers=HOOK_HEADERS, raw_body=True,
           errors=(401, 404, 409, 429)),
    )),
    Route("workflows/<slug:slug>/subscriptions", "subscriptions", (
        Op("GET", hooks.list_subscriptions, "List webhook subscriptions", HOOK, "manage_webhooks",
           {200: s.SubscriptionList}, errors=(404,)),
        Op("POST", hooks.create_subscription, "Subscribe to run and dead-letter events", HOOK,
           "manage_webhooks", {201: s.SubscriptionCreated}, body=i.SubscriptionCreate, errors=(404,)),
    )),
    Route("subscriptions/<id:subscription_id>", "subscription", (
        Op("GET", hooks.read_subscription, "Read a webhook subscription", HOOK, "manage_webhooks",
           {200: s.SubscriptionOut}, errors=(404,)),
        Op("DELETE", hooks.delete_subscription, "Delete a webhook subscription", HOOK, "manage_webhooks",
           {204: None}, errors=(404,)),
    )),
    Route("subscriptions/<id:subscription_id>/deliveries", "deliveries", (
        Op("GET", hooks.list_deliveries, "Read the delivery log", HOOK, "manage_webhooks", {200: s.DeliveryPage},
           query=i.DeliveryQuery, errors=(404,)),
    )),
    # ------------------------------------------------------------------ health and schema
    Route("health/live", "health-live", (
        Op("GET", health.live, "Liveness", META, None, {200: s.HealthOut}),
    )),
    Route("health/ready", "health-ready", (
        Op("GET", health.ready, "Readiness", META, None, {200: s.HealthOut, 503: s.HealthOut}),
    )),
    Route("openapi.json", "openapi", (
        Op("GET", openapi.schema_view, "This OpenAPI document", META, None, {200: None},
           media_type="application/json"),
    )),
    Route("docs", "docs", (
        Op("GET", openapi.docs_view, "The API documentation page", META, None, {200: None},
           media_type="text/html"),
    )),
]
# fmt: on
