"""What the API accepts: request bodies and query strings as pydantic models.

django-ninja validates requests with these classes and describes them in the OpenAPI
document from them. Bodies are read strictly (JSON types as sent, unknown fields refused);
query strings loosely (everything arrives as text), unknown parameters refused too. Headers
are typed strings whose refusal says the rule, not the regular expression.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    WithJsonSchema,
    model_validator,
)

from workflows.api.parsing import MAX_ID
from workflows.core import priorities
from workflows.core.states import RunStatus
from workflows.integrations.webhooks import EVENT_TYPES
from workflows.runs.actions import MAX_BATCH

SLUG_PATTERN = r"^[-a-zA-Z0-9_]+$"


def whole_number(value: Any) -> Any:
    """Take 3.0 as 3: JSON Schema calls any number without a fraction an integer."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


RFC3339 = re.compile(r"(\d{4}-\d{2}-\d{2})[Tt](\d{2}:\d{2}:\d{2})(\.\d{1,6})?\d*([Zz]|[+-]\d{2}:\d{2})")


def rfc3339(value: Any) -> Any:
    """Read an RFC 3339 date-time, refusing what pydantic would also take (Unix seconds, no offset)."""
    if isinstance(value, datetime):
        return value
    match = RFC3339.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError("must be an RFC 3339 date-time with an offset, like 2026-01-31T09:30:00Z")
    date, time, fraction, offset = match.groups()
    return datetime.fromisoformat(f"{date}T{time}{fraction or ''}{'+00:00' if offset in 'Zz' else offset}")


def to_utc(value: datetime) -> datetime:
    """Store instants in UTC: PostgreSQL refuses offsets beyond 15:59 that RFC 3339 allows."""
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("is out of range once converted to UTC") from None


Int = Annotated[int, BeforeValidator(whole_number)]
Moment = Annotated[AwareDatetime, BeforeValidator(rfc3339), AfterValidator(to_utc)]
Slug = Annotated[str, Field(pattern=SLUG_PATTERN, min_length=1, max_length=100)]
# The bounds come before the validator: after it (Annotated[Int, Field(ge=...)]) pydantic
# wrote them into the OpenAPI document as `ge`/`le`, which JSON Schema does not know.
Id = Annotated[int, Field(ge=1, le=MAX_ID), BeforeValidator(whole_number)]
Number = Annotated[int, Field(ge=1, le=2**31 - 1), BeforeValidator(whole_number)]
Scope = Literal["read", "run", "edit", "operate", "admin"]
EventType = Literal[EVENT_TYPES]  # type: ignore[valid-type]  # a Literal of the tuple of event names: mypy cannot evaluate a Literal built at import
RunStatus = Literal[tuple(RunStatus)]  # type: ignore[misc, assignment]  # a Literal of the enum's values, built at import: mypy cannot evaluate it, and the name is rebound from the enum
LetterStatus = Literal["open", "replayed", "discarded", "compensated"]
DeliveryStatus = Literal["pending", "sending", "succeeded", "failed"]
Definition = Annotated[
    dict[str, Any],
    Field(
        description="A workflow definition: nodes, edges, description and, optionally, input_schema"
        " (the JSON schema, draft 2020-12, a run's input must match; see the docs page)."
    ),
]


def header(
    description: str,
    pattern: str = r"[\x21-\x7e]+",  # visible ASCII, no spaces
    rule: str = "must be 1 to 200 visible ASCII characters, without spaces",
    max_length: int = 200,
) -> Any:
    """Return the type of a request header: documented by its pattern, refused with `rule`."""
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        if len(value) > max_length or not compiled.fullmatch(value):
            raise ValueError(rule)
        return value

    schema = {
        "type": "string",
        "maxLength": max_length,
        "pattern": f"^(?:{pattern})$",
        "description": description,
    }
    return Annotated[str, AfterValidator(check), WithJsonSchema(schema)]


IdempotencyKey = header(
    "Any string you choose (1-200 visible ASCII characters). The same key and input answer the "
    "run made the first time; the same key with another input is refused (409).",
)
IfMatch = header(
    'The ETag of the version as you read it, like "12-3" (or * to overwrite whatever is there).',
    pattern=r'\*|"[0-9]{1,18}-[0-9]{1,9}"',
    rule='must be the ETag of the version as read, like "12-3", or *',
)
HookTimestamp = header(
    "When the delivery was signed, in Unix seconds.", pattern="[0-9]{1,12}", rule="must be Unix seconds"
)
HookDelivery = header(
    "The delivery's id, unique per delivery: a delivery sent again starts no second run.",
    pattern="[A-Za-z0-9._:-]{1,150}",
    rule="must be 1 to 150 letters, digits, '.', '_', ':' or '-'",
    max_length=150,
)
HookSignature = header(
    "sha256=<hex HMAC-SHA256 of '<timestamp>.<delivery>.<raw body>' keyed with the trigger's secret>",
    pattern="sha256=[0-9a-f]{64}",
    rule="must be sha256= and 64 lowercase hex digits",
)
# A missing header is a 400, except where HTTP names another status for it.
MISSING_HEADER_STATUS = {"If-Match": 428}


class Body(BaseModel):
    # Strict: JSON types as they are ("1" is not 1); datetimes are read from RFC 3339 text first.
    model_config = ConfigDict(extra="forbid", strict=True)


class Query(BaseModel):
    """A query string: flat, loosely typed (it is text), unknown parameters refused.

    ninja hands a query model only the parameters it declares; the request is in the
    validation context, so the ones it does not declare are put back for `extra="forbid"`
    to name each of them.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def keep_unknown_parameters(cls, data: Any, info: ValidationInfo) -> Any:
        request = (info.context or {}).get("request")
        if request is None or not isinstance(data, dict):
            return data
        known = {field.alias or name for name, field in cls.model_fields.items()}
        return {**{k: v for k, v in request.GET.items() if k not in known}, **data}


class Page(Query):
    limit: int = Field(50, ge=1, le=200, description="Items per page.")
    cursor: str | None = Field(None, max_length=200, description="`next_cursor` of the previous page.")


# --------------------------------------------------------------------------- workflows


class WorkflowCreate(Body):
    slug: Slug
    title: str = Field(min_length=1, max_length=200)
    description: str = Field("", max_length=10000)


class WorkflowUpdate(Body):
    title: str | None = Field(
        None, min_length=1, max_length=200, description="Unchanged when absent or null."
    )
    description: str | None = Field(None, max_length=10000, description="Unchanged when absent or null.")
    default_priority: int | None = Field(
        None, ge=priorities.LOWEST, le=priorities.HIGHEST, description="Of runs started without a priority."
    )


class WorkflowQuery(Page):
    q: str | None = Field(None, max_length=100, description="Text contained in the slug or title.")
    paused: bool | None = None


# --------------------------------------------------------------------------- versions


class DraftCreate(Body):
    definition: Definition
    comment: str = Field("", max_length=2000)


class DraftUpdate(Body):
    definition: Definition
    comment: str | None = Field(None, max_length=2000, description="Unchanged when absent or null.")


class PublishIn(Body):
    activate: bool = Field(True, description="Make it the version new runs use.")


class ValidateIn(Body):
    definition: Definition


class DiffQuery(Query):
    from_version: Number = Field(alias="from", description="Version number to compare from.")
    to_version: Number = Field(alias="to", description="Version number to compare to.")


class GraphQuery(Query):
    format: Literal["mermaid", "dot"] = Field(
        "mermaid", description="mermaid (a Mermaid flowchart) or dot (a Graphviz digraph)."
    )


class ExportQuery(Query):
    version: Number | None = Field(None, description="Version number; the active version by default.")


class ImportIn(Body):
    """A workflow export, as GET /workflows/{slug}/export returns it."""

    format: Literal["switchyard.workflow/v1"]
    slug: Slug
    title: str = Field(min_length=1, max_length=200)
    description: str = Field("", max_length=10000)
    version: Int | None = None
    checksum: str | None = Field(None, max_length=80)
    definition: Definition


class ImportQuery(Query):
    publish: bool = Field(False, description="Publish and activate the imported version.")


# --------------------------------------------------------------------------- runs


class StartRunIn(Body):
    input: dict[str, Any] = Field(default_factory=dict, description="The run input, a JSON object.")
    priority: int | None = Field(
        None,
        ge=priorities.LOWEST,
        le=priorities.HIGHEST,
        description="Higher goes first when nodes wait for workers; default: the workflow's default.",
    )


class StartBatchItem(Body):
    input: dict[str, Any] = Field(default_factory=dict, description="This run's input, a JSON object.")
    idempotency_key: IdempotencyKey | None = Field(  # type: ignore[valid-type]  # header() builds an Annotated type at import: mypy cannot evaluate it
        None, description="As a single start's Idempotency-Key header, for this run."
    )
    priority: int | None = Field(
        None,
        ge=priorities.LOWEST,
        le=priorities.HIGHEST,
        description="Higher goes first when nodes wait for workers; default: the workflow's default.",
    )


class StartBatchIn(Body):
    items: list[StartBatchItem] = Field(
        min_length=1,
        max_length=MAX_BATCH,
        description=f"The runs to start, 1 to {MAX_BATCH}; each answer item has the same index.",
    )


class CancelIn(Body):
    reason: str = Field("", max_length=1000)


class RunQuery(Page):
    workflow: Slug | None = None
    status: RunStatus | None = Field(
        None,
        description="As shown: `waiting` also finds running runs with a node waiting on a person, "
        "an event, a timer or a child run (see `waiting_for`), and `running` leaves them out.",
    )
    priority_min: int | None = Field(
        None, ge=priorities.LOWEST, le=priorities.HIGHEST, description="At least this priority."
    )
    version: Number | None = Field(None, description="Version number; needs `workflow`.")
    created_after: Moment | None = None
    created_before: Moment | None = None
    input: str | None = Field(
        None, max_length=500, description="Input values, `field=value` (dotted paths, space-separated)."
    )
    error: str | None = Field(None, max_length=200, description="Text a dead letter's error contains.")
    node_id: str | None = Field(None, max_length=64, description="A node that died in the run.")
    include_tests: bool = Field(
        False,
        description="Also list runs started from the editor's Test run (left out by default, "
        "unless `version` is given).",
    )


class EventQuery(Query):
    limit: int = Field(500, ge=1, le=1000)
    cursor: str | None = Field(None, max_length=200)


# --------------------------------------------------------------------------- dead letters


class LetterQuery(Page):
    status: LetterStatus | None = None
    workflow: Slug | None = None
    run: Id | None = None
    node_id: str | None = Field(None, max_length=64)
    created_after: Moment | None = None
    created_before: Moment | None = None


class LetterFilterIn(Body):
    """Which open dead letters a bulk action applies to; absent fields match any."""

    workflow: Slug | None = None
    run: Id | None = None
    node_id: str | None = Field(None, max_length=64)
    created_after: Moment | None = None
    created_before: Moment | None = None


class BulkReplayIn(Body):
    filter: LetterFilterIn = Field(default_factory=LetterFilterIn)
    dry_run: bool = Field(description="true: only count what would be replayed.")
    limit: Int = Field(100, ge=1, le=1000, description="At most this many letters, oldest first.")


class BulkDiscardIn(BulkReplayIn):
    reason: str = Field(min_length=1, max_length=1000)


class ReplayIn(Body):
    input: dict[str, Any] | None = Field(
        None,
        description="Edited input: what the node is given as its run input on this replay and its "
        "retries. Without it, the node is given what it was given before.",
    )


class DiscardIn(Body):
    reason: str = Field(min_length=1, max_length=1000)


# --------------------------------------------------------------------------- keys and hooks


class KeyCreate(Body):
    name: str = Field(min_length=1, max_length=100)
    scopes: list[Scope] = Field(min_length=1, max_length=5)
    expires_at: Moment | None = None
    owner: str | None = Field(
        None, min_length=1, max_length=150, description="Username; the requesting key's owner by default."
    )


class TriggerCreate(Body):
    name: str = Field(min_length=1, max_length=100)
    priority: int | None = Field(
        None, ge=priorities.LOWEST, le=priorities.HIGHEST, description="Of its runs; default: the workflow's."
    )


class SubscriptionCreate(Body):
    url: str = Field(pattern=r"^https?://[^\s/?#]+[^\s]*$", max_length=2000)
    events: list[EventType] = Field(min_length=1, max_length=len(EVENT_TYPES))


class DeliveryQuery(Page):
    status: DeliveryStatus | None = None


class HookInput(BaseModel):
    """Any JSON object: it becomes the run input."""

    model_config = ConfigDict(extra="allow")


# Defaults of the bodies whose fields all have defaults: an empty body is `{}`. (pydantic
# copies a model default for each request, so sharing these is safe.)
EMPTY_UPDATE = WorkflowUpdate()
EMPTY_PUBLISH = PublishIn()
EMPTY_START = StartRunIn()
EMPTY_CANCEL = CancelIn()
EMPTY_REPLAY = ReplayIn()


# --------------------------------------------------------------------------- approvals and events


class ApprovalQuery(Query):
    limit: int = Field(50, ge=1, le=200, description="At most this many, by due time.")
    workflow: Slug | None = None
    node_id: str | None = Field(None, max_length=64)
    assignee: str | None = Field(None, max_length=150, description="A username named among the deciders.")
    older_than_seconds: float | None = Field(None, ge=0, le=10**9, description="Waiting at least this long.")
    newer_than_seconds: float | None = Field(None, ge=0, le=10**9, description="Waiting at most this long.")


class DecisionIn(Body):
    decision: Literal["approve", "reject"]
    fields: dict[str, Any] = Field(
        default_factory=dict, description="The form's fields (the node's `form` schema)."
    )
    comment: str = Field("", max_length=5000)
    data: Any = Field(None, description="The proposed data as edited by the approver; omitted: unchanged.")


class DecisionLinkIn(Body):
    decision: Literal["approve", "reject"]
    ttl_seconds: int | None = Field(None, ge=60, le=30 * 86400, description="How long the link is valid.")


class LinkDecisionIn(Body):
    token: str = Field(min_length=10, max_length=2000, description="The token of a signed decision link.")
    comment: str = Field("", max_length=5000)


class EventIn(Body):
    key: str = Field(
        min_length=1, max_length=500, description="The key wait.event nodes compute, e.g. an order id."
    )
    payload: Any = Field(default_factory=dict, description="The woken nodes' output.")
    source: str = Field("", max_length=200)


# --------------------------------------------------------------------------- runs: re-run, groups


class RerunIn(Body):
    node_id: str = Field(min_length=1, max_length=64, description="The node to re-run from.")


class ForkIn(Body):
    node_id: str = Field(
        min_length=1, max_length=64, description="The fork point: this node and every node below it run."
    )
    version: int | None = Field(
        None,
        ge=1,
        le=MAX_ID,
        description="The version number to run the fork on: a published version or a draft (frozen first "
        "into a test-run snapshot); default: the run's own version.",
    )
    input: dict[str, Any] | None = Field(
        None,
        description="Edited input: what the fork point is given as its run input. Without it, the run's input.",
    )
    calls: Literal["live", "recorded", "recorded-then-live"] = Field(
        "live",
        description="How the fork's LLM calls, agent tool calls and http.request calls are made: live; recorded (a call whose "
        "request hashes like one this run made is answered from its record, any other fails the node naming "
        "the difference); recorded-then-live (identical calls replayed, new ones made live).",
    )


class GroupQuery(Query):
    status: LetterStatus | None = "open"
    workflow: Slug | None = None
    node_id: str | None = Field(None, max_length=64)
    error: str | None = Field(None, max_length=200)
    created_after: Moment | None = None
    created_before: Moment | None = None
