"""The store: Postgres is the source of truth for every workflow, version and run.

From these tables alone every run can be finished after any crash: Redis only carries jobs,
completion notices and counters, and the reconciler rebuilds those from here.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import Q

from workflows.core.states import NodeStatus, RunStatus

NODE_STATUS_CHOICES = [(s, s) for s in tuple(NodeStatus)]
RUN_STATUS_CHOICES = [(s, s) for s in tuple(RunStatus)]


class Workflow(models.Model):
    slug = models.SlugField(max_length=100, unique=True)
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    # Paused: new runs are recorded as waiting and none of them starts until resumed.
    paused = models.BooleanField(default=False)
    # Days its finished runs are kept (workflows/operations/retention.py); None: the default, 0: for ever.
    retention_days = models.PositiveIntegerField(null=True, blank=True)
    # The priority of runs started without one (core/priorities.py).
    default_priority = models.SmallIntegerField(default=0)
    active_version = models.ForeignKey(
        "WorkflowVersion", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class WorkflowVersion(models.Model):
    """One definition of a workflow. A published version never changes again."""

    DRAFT = "draft"
    PUBLISHED = "published"

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=[(DRAFT, DRAFT), (PUBLISHED, PUBLISHED)], default=DRAFT)
    definition = models.JSONField()
    checksum = models.CharField(max_length=80)
    # Bumped by every saved change of a draft: the optimistic-concurrency token (ETag).
    revision = models.PositiveIntegerField(default=1)
    comment = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    published_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["workflow", "-number"]
        constraints = [models.UniqueConstraint(fields=["workflow", "number"], name="version_number_unique")]

    def __str__(self) -> str:
        return f"{self.workflow_id} v{self.number}"

    @property
    def is_published(self) -> bool:
        return self.status == self.PUBLISHED

    @property
    def is_test_version(self) -> bool:
        """Whether this is the frozen copy of a draft made for a test run or a fork onto a draft
        (versions/editing.freeze_draft): published, never activated by it, labelled "test"
        wherever its number is shown."""
        return self.comment.startswith(TEST_VERSION_PREFIX)


# The comment of a version frozen from a draft for a test run (versions/editing.freeze_draft).
TEST_VERSION_PREFIX = "test-run snapshot of draft"


class Run(models.Model):
    workflow = models.ForeignKey(Workflow, on_delete=models.PROTECT, related_name="runs")
    version = models.ForeignKey(WorkflowVersion, on_delete=models.PROTECT, related_name="runs")
    status = models.CharField(max_length=24, choices=RUN_STATUS_CHOICES, default=RunStatus.RUNNING)
    # How many of its nodes are `waiting` (written by transitions' wait statements only).
    waiting_nodes = models.PositiveIntegerField(db_default=0)  # db_default: raw INSERTs omit it
    priority = models.SmallIntegerField(db_default=0)  # core/priorities.py
    input = models.JSONField(default=dict)
    # Started from the editor's Test run (versions/editing.start_test_run): left out of the
    # production lists and counts unless asked for (runs list, overview, workflow list).
    is_test = models.BooleanField(default=False, db_default=False)  # db_default: raw INSERTs omit it
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)
    request_hash = models.CharField(max_length=80, blank=True)
    # Bumped by every replay: a finish decided from an older snapshot no longer applies.
    epoch = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # A debounced or singleton start's key value (runs/startkeys.py), and for a debounced
    # run that waits, when its window ends.
    start_key = models.CharField(max_length=200, null=True, blank=True)
    start_due_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["workflow", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="run_idempotency_key_unique",
            )
        ]
        indexes = [
            models.Index(
                fields=["workflow", "start_key", "status"],
                condition=Q(start_key__isnull=False),
                name="run_start_key_idx",
            ),
            models.Index(fields=["status", "id"], name="run_status_idx"),
            models.Index(fields=["workflow", "-created_at"], name="run_workflow_created_idx"),
            # The charts' bucketed counts and durations over a window of finish times
            # (monitoring/services/charts.py), index-only; written once per run, when it finishes.
            models.Index(fields=["finished_at"], include=["status", "created_at"], name="run_finished_idx"),
            models.Index(
                fields=["workflow", "finished_at"],
                include=["status", "created_at"],
                name="run_workflow_finished_idx",
            ),
            # The reconciler's stalled-run scan reads only running runs with no waiting node,
            # so runs waiting on a person or an event for days cost it nothing.
            models.Index(
                fields=["id"],
                condition=Q(status="running", waiting_nodes=0),
                name="run_stall_candidates_idx",
            ),
            # Runs undoing their work (sagas.py): the reconciler's probe reads only these.
            models.Index(fields=["id"], condition=Q(status="compensating"), name="run_compensating_idx"),
            # Runs searched by input values (`input @> '{"customer": "acme"}'`): ops/issue 16.
            GinIndex(fields=["input"], opclasses=["jsonb_path_ops"], name="run_input_gin_idx"),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} ({self.status})"


class NodeRun(models.Model):
    """One node of one run. `attempt` counts every attempt ever made; `tries` counts those
    of the current retry budget (a replay starts a new budget); `lost` counts attempts lost
    with their worker and forgiven, which `tries` leaves out (transitions.fail_lost)."""

    # No index of its own: the unique (run, node_id) index serves lookups by run, and every
    # status change (four per node, none of them HOT) would update one more index.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="nodes", db_index=False)
    node_id = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=NODE_STATUS_CHOICES, default=NodeStatus.PENDING)
    attempt = models.PositiveIntegerField(default=0)
    tries = models.PositiveIntegerField(default=0)
    # Attempts lost with their worker that `tries` does not count (FREE_LOST_ATTEMPTS).
    lost = models.PositiveIntegerField(db_default=0)  # db_default: raw INSERTs omit it
    queue = models.CharField(max_length=40, default="default")
    job_id = models.CharField(max_length=64, blank=True)
    worker = models.CharField(max_length=120, blank=True)
    queued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    due_at = models.DateTimeField(null=True, blank=True)
    output = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    traceback = models.TextField(blank=True)
    # False: the last attempt failed in a way no retry can fix (handlers.HandlerError): dead at once.
    retryable = models.BooleanField(db_default=True)  # db_default: raw INSERTs omit it
    # What this node is given as its run input instead of the run's: set by a replay with
    # edited input (runs.replay_dead_letter), kept for its retries and later replays.
    input_override = models.JSONField(null=True, blank=True)
    # Its concurrency key (core/flowcontrol.py: "<scope>:<value>"), written when a scheduler
    # first admits or holds it; in-flight counts per key are read from these rows.
    flow_key = models.CharField(max_length=270, null=True, blank=True)

    class Meta:
        ordering = ["run", "id"]
        constraints = [models.UniqueConstraint(fields=["run", "node_id"], name="noderun_run_node_unique")]
        indexes = [
            models.Index(fields=["due_at"], condition=Q(status="retrying"), name="noderun_retry_due_idx"),
            # Ready nodes held back by their concurrency cap (capacity.py), oldest first.
            models.Index(
                fields=["due_at"],
                condition=Q(status="pending", due_at__isnull=False),
                name="noderun_held_idx",
            ),
            models.Index(  # waiting: an attempt holds its node's cap while it waits (capacity.py)
                fields=["status", "queued_at"],
                condition=Q(status__in=["queued", "running", "failed", "waiting"]),
                name="noderun_in_flight_idx",
            ),
            # Waiting nodes' next deadline (a timer's end, an SLA, a timeout): the schedulers'
            # housekeeping reads only the due ones, however many wait (waits.fire_deadlines).
            models.Index(fields=["due_at"], condition=Q(status="waiting"), name="noderun_wait_due_idx"),
            # In flight and held per concurrency key (capacity.py, the per-key figures).
            models.Index(
                fields=["flow_key", "status"],
                condition=Q(flow_key__isnull=False, status__in=["pending", "queued", "running", "waiting"]),
                name="noderun_flow_key_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.run_id}:{self.node_id} ({self.status})"

    @property
    def idempotency_key(self) -> str:
        return f"{self.run_id}:{self.node_id}:{self.attempt}"


class Wait(models.Model):
    """What one attempt of a waiting node waits for (workflows/waits/waiting.py).

    The node's status (NodeRun, `waiting`) is the truth of whether it still waits; this row
    says for what, who may decide, when it is due, and how it ended (`outcome`, `closed_at`).
    An approval's deciders are `users`, `groups` and `roles` (arrays, so the inbox is one
    indexed query); none of them: any operator (`open_to_operators`).
    """

    node_run = models.ForeignKey(NodeRun, on_delete=models.CASCADE, related_name="waits")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="waits", db_index=False)
    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="+", db_index=False)
    node_id = models.CharField(max_length=64)
    attempt = models.PositiveIntegerField()
    kind = models.CharField(max_length=20)
    title = models.CharField(max_length=200, blank=True)
    key = models.CharField(max_length=500, blank=True)  # wait.event
    first_only = models.BooleanField(default=False)
    proposed = models.JSONField(null=True, blank=True)  # human.approval: data offered for editing
    users = ArrayField(models.CharField(max_length=150), default=list, blank=True)
    groups = ArrayField(models.CharField(max_length=150), default=list, blank=True)
    roles = ArrayField(models.CharField(max_length=20), default=list, blank=True)
    open_to_operators = models.BooleanField(default=False)
    due_at = models.DateTimeField(null=True, blank=True)  # the SLA shown to approvers
    escalate_at = models.DateTimeField(null=True, blank=True)
    escalated_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=20, blank=True)  # decided, event, expired, cancelled
    result = models.JSONField(null=True, blank=True)  # the node's output (a decision, a payload)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["node_run", "attempt"], name="wait_attempt_unique")]
        indexes = [
            models.Index(
                fields=["key", "id"],
                condition=Q(closed_at__isnull=True, kind="wait.event"),
                name="wait_open_key_idx",
            ),
            models.Index(
                fields=["due_at", "id"],
                condition=Q(closed_at__isnull=True, kind="human.approval"),
                name="wait_open_approval_idx",
            ),
            # The provider holds' duty reads the open ones every 0.5 s (workflows/providers_health).
            models.Index(
                fields=["id"],
                condition=Q(closed_at__isnull=True, kind="provider"),
                name="wait_open_provider_idx",
            ),
            models.Index(fields=["run"], name="wait_run_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.run_id}:{self.node_id}"


class PostedEvent(models.Model):
    """An event posted on a key (waits.post_event). One that woke nobody is `retained` until
    `expires_at`: the first node to wait on its key later consumes it."""

    key = models.CharField(max_length=500)
    payload = models.JSONField(default=dict, null=True)  # null: the event said `"payload": null`
    source = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    retained = models.BooleanField(default=False)
    woke = ArrayField(models.BigIntegerField(), default=list, blank=True)  # node rows it woke

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["key", "id"], condition=Q(retained=True), name="event_retained_idx")]

    def __str__(self) -> str:
        return f"event {self.key}"


class DeadLetter(models.Model):
    OPEN = "open"
    REPLAYED = "replayed"
    DISCARDED = "discarded"
    # Closed by the system: its run's saga undid the run's work (runtime/compensations.py).
    COMPENSATED = "compensated"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="dead_letters")
    node_run = models.ForeignKey(NodeRun, on_delete=models.CASCADE, related_name="dead_letters")
    node_id = models.CharField(max_length=64)
    attempt = models.PositiveIntegerField()
    error = models.TextField(blank=True)
    traceback = models.TextField(blank=True)
    input_snapshot = models.JSONField(default=dict)
    # The dead item of a map node (node_run is the map node): replaying the letter replays it.
    map_item = models.ForeignKey(
        "MapItem", null=True, blank=True, on_delete=models.CASCADE, related_name="dead_letters"
    )
    status = models.CharField(
        max_length=16,
        choices=[(OPEN, OPEN), (REPLAYED, REPLAYED), (DISCARDED, DISCARDED), (COMPENSATED, COMPENSATED)],
        default=OPEN,
    )
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reason = models.TextField(blank=True)
    # The error with numbers and ids normalised (core.signatures), written when filed: groups.
    signature = models.CharField(max_length=200, blank=True, db_default="")
    # Also indexed by migration 0017 (SQL: Django cannot write an opclass on an expression for
    # GIN): `deadletter_error_trgm_idx` on UPPER(error) gin_trgm_ops, for "error contains".

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["status", "-created_at"], name="deadletter_status_idx"),
            models.Index(fields=["status", "node_id", "signature"], name="deadletter_group_idx"),
            models.Index(fields=["created_at"], name="deadletter_created_idx"),  # charts: opened per bucket
        ]

    def __str__(self) -> str:
        return f"dead letter {self.pk} ({self.node_id} of run {self.run_id})"


class RunEvent(models.Model):
    """Append-only history of a run. Node attempts carry start and end: they are the spans
    of the run's trace."""

    # No index of its own: runevent_run_idx (run, id) serves lookups by run.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events", db_index=False)
    kind = models.CharField(max_length=40)
    node_id = models.CharField(max_length=64, blank=True)
    attempt = models.PositiveIntegerField(default=0)
    at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=120, blank=True)
    data = models.JSONField(default=dict)

    class Meta:
        ordering = ["run", "id"]
        indexes = [models.Index(fields=["run", "id"], name="runevent_run_idx")]

    def __str__(self) -> str:
        return f"{self.run_id} {self.kind} {self.node_id}"


class AuditEntry(models.Model):
    """Who did what to which object, and when: every operator and editor action."""

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    actor_label = models.CharField(max_length=200, blank=True)  # username or "api key <prefix>"
    action = models.CharField(max_length=60)
    target_type = models.CharField(max_length=40)
    target_id = models.CharField(max_length=64)
    data = models.JSONField(default=dict)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["target_type", "target_id"], name="audit_target_idx")]

    def __str__(self) -> str:
        return f"{self.actor_label} {self.action} {self.target_type}:{self.target_id}"


# --------------------------------------------------------------------------- integrations
# API keys, inbound triggers and outbound webhooks (workflows/integrations/keys.py, workflows/integrations/webhooks.py).


class ApiKey(models.Model):
    """A bearer credential for the REST API: `sy_<prefix>_<secret>`, stored as a sha256 hash.

    A key acts for its owner: it needs the scope an action names *and* its owner the role
    (controlplane/access.py), so a key never does more than the person who holds it.
    """

    name = models.CharField(max_length=100)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys")
    prefix = models.CharField(max_length=8, unique=True)
    hash = models.CharField(max_length=64)
    scopes = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"api key sy_{self.prefix}…"


class Trigger(models.Model):
    """An inbound webhook: a signed POST to /api/v1/hooks/<id> starts a run of the workflow."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="triggers")
    name = models.CharField(max_length=100)
    # HMAC key: kept in clear because verifying a signature needs it; shown once at creation.
    secret = models.CharField(max_length=100)
    active = models.BooleanField(default=True)
    priority = models.SmallIntegerField(null=True, blank=True)  # of its runs; None: the workflow's default
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["workflow", "created_at"]

    def __str__(self) -> str:
        return f"trigger {self.name} of {self.workflow_id}"


class WebhookSubscription(models.Model):
    """An outbound webhook: run and dead-letter events of one workflow, POSTed signed to `url`."""

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="subscriptions")
    url = models.URLField(max_length=2000)
    events = models.JSONField(default=list)
    secret = models.CharField(max_length=100)
    active = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["workflow", "id"]

    def __str__(self) -> str:
        return f"subscription {self.pk} of {self.workflow_id} -> {self.url}"


class WebhookDelivery(models.Model):
    """One event sent (or being sent) to one subscription: the delivery log and its retry state."""

    PENDING, SENDING, SUCCEEDED, FAILED = "pending", "sending", "succeeded", "failed"
    STATUSES = (PENDING, SENDING, SUCCEEDED, FAILED)

    subscription = models.ForeignKey(WebhookSubscription, on_delete=models.CASCADE, related_name="deliveries")
    # The RunEvent it reports; not a foreign key, so the log outlives deleted runs.
    event_id = models.BigIntegerField()
    event_type = models.CharField(max_length=40)
    payload = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=[(s, s) for s in STATUSES], default=PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    enqueued_at = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    response_status = models.PositiveIntegerField(null=True, blank=True)
    response_body = models.TextField(blank=True)
    error = models.TextField(blank=True)
    duration_ms = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["subscription", "event_id"], name="delivery_subscription_event_unique"
            )
        ]
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                condition=Q(status__in=["pending", "sending"]),
                name="delivery_due_idx",
            )
        ]

    def __str__(self) -> str:
        return f"delivery {self.pk} ({self.event_type}, {self.status})"


class WebhookCursor(models.Model):
    """How far the outbound dispatcher has read RunEvent ids.

    `checkpoints` keeps [unix time, highest id] pairs of recent scans: each scan starts from
    the newest checkpoint that is a few seconds old, so an event whose transaction took its
    id early but committed late is still seen (deliveries are unique per event).
    """

    name = models.CharField(max_length=40, unique=True)
    checkpoints = models.JSONField(default=list)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"cursor {self.name}"


# --- LLM providers, prices and calls ---


class LLMProvider(models.Model):
    """A named endpoint of a kind (OpenAI-compatible chat completions, or Anthropic's Messages
    API). The key is write-only: no page, API answer, log line or error ever shows it again
    after it is saved."""

    OPENAI, ANTHROPIC = "openai", "anthropic"
    KINDS = [(OPENAI, "OpenAI-compatible"), (ANTHROPIC, "Anthropic")]

    name = models.SlugField(max_length=60, unique=True)
    kind = models.CharField(max_length=20, choices=KINDS, default=OPENAI)
    base_url = models.URLField(max_length=500)
    api_key = models.TextField(blank=True)
    default_model = models.CharField(max_length=200)
    # The models a node may name; empty means only default_model.
    offered_models = models.JSONField(default=list, blank=True)
    timeout_seconds = models.FloatField(default=60.0)
    is_default = models.BooleanField(default=False)
    demo = models.BooleanField(default=False)  # the embedded scripted server, not a real model
    # Flow limits as the provider publishes them, shared by every worker (providers_health);
    # null: no limit.
    rpm_limit = models.PositiveIntegerField(null=True, blank=True)
    tpm_limit = models.PositiveIntegerField(null=True, blank=True)
    # The breaker of each of its models (providers_health): opens after this many failures
    # in a row, or when at least `breaker_min_calls` calls in `breaker_window_seconds` failed
    # at `breaker_error_rate` or more; stays open `breaker_open_seconds` (or the Retry-After).
    breaker_failures = models.PositiveIntegerField(default=5)
    breaker_error_rate = models.FloatField(default=0.5)
    breaker_window_seconds = models.FloatField(default=60.0)
    breaker_min_calls = models.PositiveIntegerField(default=20)
    breaker_open_seconds = models.FloatField(default=30.0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["is_default"], condition=Q(is_default=True), name="llmprovider_one_default"
            )
        ]

    def __str__(self) -> str:
        return self.name

    def models_offered(self) -> list[str]:
        return list(dict.fromkeys([self.default_model, *self.offered_models]))


class LLMPrice(models.Model):
    """What one model costs, per million input and output tokens (in the currency of choice).

    Keyed by provider and model: a row without a provider is the model's price through any
    provider, the fallback when the provider has no price of its own (`llm.prices.pick_price`).
    """

    # Deleting a provider deletes its own prices; its recorded calls keep their cost.
    provider = models.ForeignKey(
        LLMProvider, null=True, blank=True, on_delete=models.CASCADE, related_name="prices"
    )
    model = models.CharField(max_length=200)
    input_per_million = models.DecimalField(max_digits=12, decimal_places=4)
    output_per_million = models.DecimalField(max_digits=12, decimal_places=4)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        # By id, not name: a join here would refuse update_or_create's SELECT ... FOR UPDATE.
        ordering = ["model", models.F("provider").asc(nulls_first=True)]
        constraints = [
            models.UniqueConstraint(
                fields=["provider", "model"],
                condition=Q(provider__isnull=False),
                name="llmprice_provider_model",
            ),
            models.UniqueConstraint(
                fields=["model"], condition=Q(provider__isnull=True), name="llmprice_any_provider_model"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model} ({self.provider.name if self.provider else 'any provider'})"


class LLMCall(models.Model):
    """One call to an LLM: who made it, what it used, what it cost (NULL: price unknown)."""

    node_run = models.ForeignKey(NodeRun, on_delete=models.CASCADE, related_name="llm_calls")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="llm_calls")
    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="llm_calls")
    node_id = models.CharField(max_length=64)
    attempt = models.PositiveIntegerField()
    # An agent loop's turn, a map item's "item N"; blank for llm.chat.
    step = models.CharField(max_length=100, blank=True)
    provider = models.CharField(max_length=60)
    model = models.CharField(max_length=200)  # as asked for (the price table's key)
    response_model = models.CharField(max_length=200, blank=True)  # as the provider named it
    demo = models.BooleanField(default=False)
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    latency_ms = models.FloatField(default=0.0)
    first_token_ms = models.FloatField(null=True, blank=True)  # streamed calls: time to first token
    # Of input_tokens, those read from and written to the provider's prompt cache (Anthropic
    # reports them apart; NULL when the provider does not say).
    cache_read_tokens = models.PositiveIntegerField(null=True, blank=True)
    cache_write_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost = models.DecimalField(max_digits=16, decimal_places=8, null=True, blank=True)
    finish_reason = models.CharField(max_length=40, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["created_at"], name="llmcall_created_idx"),
            models.Index(fields=["workflow", "created_at"], name="llmcall_workflow_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.provider}/{self.model} for {self.run_id}:{self.node_id}:{self.attempt}"


class RunTraceParent(models.Model):
    """The W3C trace context a run was started with: its spans join the caller's trace."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, primary_key=True, related_name="trace_parent")
    trace_id = models.CharField(max_length=32)
    parent_span_id = models.CharField(max_length=16)

    def __str__(self) -> str:
        return f"00-{self.trace_id}-{self.parent_span_id}"


# --- agent steps ---
# The durable step log of `llm.agent` nodes (core/agent.py, workflows/agents/steps.py).


class AgentStep(models.Model):
    """One finished (or failed) model turn or tool call of an agent node.

    The log belongs to the node's row across its attempts: `seq` numbers the steps of the
    node (every attempt continues the numbering) and `attempt` says which attempt recorded
    the step. An attempt continues from the earlier attempts' steps of the same
    `fingerprint` (see core/agent.py), so finished turns and tool calls are never repeated.
    """

    node_run = models.ForeignKey(
        NodeRun, on_delete=models.CASCADE, related_name="agent_steps", db_index=False
    )
    seq = models.PositiveIntegerField()
    attempt = models.PositiveIntegerField()
    kind = models.CharField(max_length=8)  # turn | tool
    # ok | error (told to the model) | failed | waiting (a workflow tool's child run goes on)
    status = models.CharField(max_length=8)
    fingerprint = models.CharField(max_length=32)
    idempotency_key = models.CharField(max_length=200)
    # turn: the request sent (messages, tools offered) and the answer (text, tool calls)
    request = models.JSONField(null=True, blank=True)
    response = models.JSONField(null=True, blank=True)
    model = models.CharField(max_length=200, blank=True)
    finish_reason = models.CharField(max_length=40, blank=True)
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    # tool: which call of which turn, the handler, its arguments and output
    turn_seq = models.PositiveIntegerField(null=True, blank=True)
    call_id = models.CharField(max_length=200, blank=True)
    tool = models.CharField(max_length=120, blank=True)  # a handler, or workflow:<slug>
    arguments = models.JSONField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()

    class Meta:
        ordering = ["node_run", "seq"]
        constraints = [models.UniqueConstraint(fields=["node_run", "seq"], name="agentstep_node_seq_unique")]

    def __str__(self) -> str:
        return f"{self.node_run_id} step {self.seq} ({self.kind})"

    @property
    def duration_ms(self) -> float:
        return round((self.finished_at - self.started_at).total_seconds() * 1000, 1)


# --- schedules ---


class Schedule(models.Model):
    """A workflow's runs started by the clock (workflows/schedules/timetable.py, core/schedules.py).

    `next_fire_at` is when the schedulers look at it next (its next nominal fire plus jitter,
    or sooner while fires are queued behind an active run); `last_fire_at` is the latest
    nominal fire handled (started, skipped or queued). Fires wait in `queued_fires` (ISO
    times, oldest first) under the `queue` overlap policy.
    """

    KIND_CHOICES = [("cron", "cron"), ("interval", "interval")]
    OVERLAP_CHOICES = [(o, o) for o in ("skip", "allow", "cancel", "queue")]
    CATCHUP_CHOICES = [(c, c) for c in ("none", "latest", "all")]

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="schedules")
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=10, choices=KIND_CHOICES, default="cron")
    cron = models.CharField(max_length=200, blank=True)
    timezone = models.CharField(max_length=64, default="UTC")
    interval_seconds = models.PositiveIntegerField(null=True, blank=True)
    input = models.JSONField(default=dict, blank=True)
    priority = models.SmallIntegerField(null=True, blank=True)  # None: the workflow's default
    overlap = models.CharField(max_length=10, choices=OVERLAP_CHOICES, default="skip")
    catchup = models.CharField(max_length=10, choices=CATCHUP_CHOICES, default="latest")
    catchup_bound = models.PositiveSmallIntegerField(default=10)
    jitter_seconds = models.PositiveIntegerField(default=0)
    enabled = models.BooleanField(default=True)
    anchor = models.DateTimeField()  # intervals count from here (set at creation and each edit)
    next_fire_at = models.DateTimeField(null=True, blank=True)
    last_fire_at = models.DateTimeField(null=True, blank=True)
    queued_fires = models.JSONField(default=list, blank=True)
    last_outcome = models.CharField(max_length=300, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["workflow", "name"]
        constraints = [models.UniqueConstraint(fields=["workflow", "name"], name="schedule_name_unique")]
        indexes = [
            # The schedulers' probe reads only the due ones, however many schedules there are.
            models.Index(fields=["next_fire_at"], condition=Q(enabled=True), name="schedule_due_idx"),
        ]

    def __str__(self) -> str:
        return f"schedule {self.name} of {self.workflow_id}"


# --- map nodes ---
# A map node's items (workflows/core/maps.py, workflows/runtime/mapping.py).


class MapItem(models.Model):
    """One item of a map node: its value, and its attempts as a task's (same statuses, same
    table of moves; written by workflows/runtime/transitions.py only).

    The map node (`node_run`) waits while its items run; `attempt` counts this item's
    attempts, `tries` those of its current retry budget (a replay starts a new one).
    """

    node_run = models.ForeignKey(NodeRun, on_delete=models.CASCADE, related_name="items", db_index=False)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+", db_index=False)
    index = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=NODE_STATUS_CHOICES, default=NodeStatus.PENDING)
    item = models.JSONField(null=True)
    attempt = models.PositiveIntegerField(default=0)
    tries = models.PositiveIntegerField(default=0)
    lost = models.PositiveIntegerField(db_default=0)  # as NodeRun.lost
    job_id = models.CharField(max_length=64, blank=True)
    worker = models.CharField(max_length=120, blank=True)
    queued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    due_at = models.DateTimeField(null=True, blank=True)
    output = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    traceback = models.TextField(blank=True)
    retryable = models.BooleanField(db_default=True)  # as NodeRun.retryable

    class Meta:
        ordering = ["node_run", "index"]
        constraints = [
            models.UniqueConstraint(fields=["node_run", "index"], name="mapitem_node_index_unique")
        ]
        indexes = [
            # The next items to claim, in order; and whether any item is still unfinished.
            models.Index(
                fields=["node_run", "index"],
                condition=Q(status__in=["pending", "retrying", "queued", "running", "failed"]),
                name="mapitem_open_idx",
            ),
            models.Index(fields=["due_at"], condition=Q(status="retrying"), name="mapitem_retry_due_idx"),
            # A map's items in flight: counted at every claim, so it stays O(max_parallel).
            models.Index(
                fields=["node_run"],
                condition=Q(status__in=["queued", "running", "failed"]),
                name="mapitem_in_flight_idx",
            ),
            # The reconciler's scans of items queued or running for long.
            models.Index(
                fields=["status", "queued_at"],
                condition=Q(status__in=["queued", "running"]),
                name="mapitem_queued_idx",
            ),
            models.Index(fields=["run"], name="mapitem_run_idx"),
        ]

    def __str__(self) -> str:
        return f"item {self.index} of {self.node_run_id} ({self.status})"


# --- child runs ---


class ChildRun(models.Model):
    """The link from a workflow.run node's attempt (or an llm.agent's workflow tool call,
    `agent_step`: its key is `parent:<run>:<node>:tool:<turn>.<index>`) to the child run it started.

    Written in the transaction that moves the node to `waiting` and creates the child run
    (whose idempotency key is `parent:<run>:<node>:<attempt>`), so a child exists exactly
    when its link does; `settled_at` is set in the transaction that ends the child and
    moves the parent node on (workflows/runtime/parents.py).
    """

    parent_run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="child_links")
    node_run = models.ForeignKey(NodeRun, on_delete=models.CASCADE, related_name="child_links")
    node_id = models.CharField(max_length=64)
    attempt = models.PositiveIntegerField()
    child = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="parent_link")
    depth = models.PositiveIntegerField(default=1)  # 1: a child of a run nobody started
    created_at = models.DateTimeField(auto_now_add=True)
    settled_at = models.DateTimeField(null=True, blank=True)
    # An llm.agent's tool call that started it (workflows/agents/tools.py); None: a workflow.run node.
    agent_step = models.OneToOneField(
        "AgentStep", null=True, blank=True, on_delete=models.CASCADE, related_name="child_link"
    )

    class Meta:
        ordering = ["id"]
        constraints = [
            # An agent's attempt may start several children, one per tool call (agent_step).
            models.UniqueConstraint(
                fields=["node_run", "attempt"],
                condition=Q(agent_step__isnull=True),
                name="child_run_one_per_attempt",
            )
        ]
        indexes = [
            models.Index(
                fields=["parent_run"], condition=Q(settled_at__isnull=True), name="child_run_open_idx"
            )
        ]

    def __str__(self) -> str:
        return f"run {self.parent_run_id} {self.node_id}#{self.attempt} -> run {self.child_id}"


# --- charts ---


class BacklogSample(models.Model):
    """Jobs waiting, sampled by the broadcaster once a BACKLOG_SAMPLE_SECONDS: a queue's depth
    in Redis (`queue` set, no workflow) or a workflow's queued nodes (`workflow` set).

    Queue depth lives only in Redis, now; the backlog chart needs its history, so it is
    written here, a row per queue and workflow per sample, kept BACKLOG_KEEP_DAYS.
    """

    at = models.DateTimeField()
    queue = models.CharField(max_length=40, blank=True)
    workflow = models.ForeignKey(Workflow, null=True, blank=True, on_delete=models.CASCADE, db_index=False)
    depth = models.PositiveIntegerField()

    class Meta:
        indexes = [
            models.Index(fields=["at"], name="backlog_at_idx"),
            models.Index(fields=["workflow", "at"], name="backlog_workflow_at_idx"),
        ]

    def __str__(self) -> str:
        return f"backlog {self.queue or self.workflow_id} {self.depth} at {self.at}"


# Models of their own modules, defined once the models above exist (re-exported here).
from workflows.store.budgets import (  # noqa: E402
    Budget as Budget,
    BudgetHold as BudgetHold,
    BudgetLedger as BudgetLedger,
    BudgetReservation as BudgetReservation,
    RunApiKey as RunApiKey,
)
from workflows.store.forks import RunFork as RunFork  # noqa: E402
from workflows.store.mcpservers import McpServer as McpServer  # noqa: E402
from workflows.store.provider_health import BreakerDecision as BreakerDecision  # noqa: E402
from workflows.store.recordings import RecordedCall as RecordedCall  # noqa: E402
from workflows.store.responsecache import CachedResponse as CachedResponse  # noqa: E402
from workflows.store.secrets import Secret as Secret  # noqa: E402
from workflows.store.suites import (  # noqa: E402
    Suite as Suite,
    SuiteCase as SuiteCase,
    SuiteCaseRun as SuiteCaseRun,
    SuiteRun as SuiteRun,
)
from workflows.store.topics import (  # noqa: E402
    Topic as Topic,
    TopicEvent as TopicEvent,
    TopicHook as TopicHook,
    TopicSubscription as TopicSubscription,
)
