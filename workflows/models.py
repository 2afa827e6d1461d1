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


class Run(models.Model):
    workflow = models.ForeignKey(Workflow, on_delete=models.PROTECT, related_name="runs")
    version = models.ForeignKey(WorkflowVersion, on_delete=models.PROTECT, related_name="runs")
    status = models.CharField(max_length=16, choices=RUN_STATUS_CHOICES, default=RunStatus.RUNNING)
    # How many of its nodes are `waiting` (written by transitions' wait statements only).
    waiting_nodes = models.PositiveIntegerField(db_default=0)  # db_default: raw INSERTs omit it
    input = models.JSONField(default=dict)
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)
    request_hash = models.CharField(max_length=80, blank=True)
    # Bumped by every replay: a finish decided from an older snapshot no longer applies.
    epoch = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

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
            models.Index(fields=["status", "id"], name="run_status_idx"),
            models.Index(fields=["workflow", "-created_at"], name="run_workflow_created_idx"),
            # The reconciler's stalled-run scan reads only running runs with no waiting node,
            # so runs waiting on a person or an event for days cost it nothing.
            models.Index(
                fields=["id"],
                condition=Q(status="running", waiting_nodes=0),
                name="run_stall_candidates_idx",
            ),
            # Runs searched by input values (`input @> '{"customer": "acme"}'`): ops/issue 16.
            GinIndex(fields=["input"], opclasses=["jsonb_path_ops"], name="run_input_gin_idx"),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} ({self.status})"


class NodeRun(models.Model):
    """One node of one run. `attempt` counts every attempt ever made; `tries` counts those
    of the current retry budget (a replay starts a new budget)."""

    # No index of its own: the unique (run, node_id) index serves lookups by run, and every
    # status change (four per node, none of them HOT) would update one more index.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="nodes", db_index=False)
    node_id = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=NODE_STATUS_CHOICES, default=NodeStatus.PENDING)
    attempt = models.PositiveIntegerField(default=0)
    tries = models.PositiveIntegerField(default=0)
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
    # What this node is given as its run input instead of the run's: set by a replay with
    # edited input (runs.replay_dead_letter), kept for its retries and later replays.
    input_override = models.JSONField(null=True, blank=True)

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
            models.Index(
                fields=["status", "queued_at"],
                condition=Q(status__in=["queued", "running", "failed"]),
                name="noderun_in_flight_idx",
            ),
            # Waiting nodes' next deadline (a timer's end, an SLA, a timeout): the schedulers'
            # housekeeping reads only the due ones, however many wait (waits.fire_deadlines).
            models.Index(fields=["due_at"], condition=Q(status="waiting"), name="noderun_wait_due_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.run_id}:{self.node_id} ({self.status})"

    @property
    def idempotency_key(self) -> str:
        return f"{self.run_id}:{self.node_id}:{self.attempt}"


class Wait(models.Model):
    """What one attempt of a waiting node waits for (workflows/waits.py).

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

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="dead_letters")
    node_run = models.ForeignKey(NodeRun, on_delete=models.CASCADE, related_name="dead_letters")
    node_id = models.CharField(max_length=64)
    attempt = models.PositiveIntegerField()
    error = models.TextField(blank=True)
    traceback = models.TextField(blank=True)
    input_snapshot = models.JSONField(default=dict)
    status = models.CharField(
        max_length=16, choices=[(OPEN, OPEN), (REPLAYED, REPLAYED), (DISCARDED, DISCARDED)], default=OPEN
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
# API keys, inbound triggers and outbound webhooks (workflows/keys.py, workflows/webhooks.py).


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
