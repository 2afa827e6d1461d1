"""Nodes that wait: their config schemas, the checks beyond them, and what a wait becomes.

Pure: standard library, jsonschema and the condition language; time is a parameter. Three
kinds, named in a definition like handlers (graph.WAIT_KINDS) and registered with these
schemas so the editor's generated forms offer them:

- `human.approval`: a person approves or rejects, filling the fields of `form` (a JSON
  schema) and possibly editing the data proposed to them (`propose`, an expression); who
  may decide is `approvers` (users, groups, roles; none: any operator); after `due_seconds`
  (the SLA) the approval is escalated to `escalate_to` (added to the approvers, or instead
  of them with `escalation: "reassign"`); after `timeout_seconds` it times out and
  `on_timeout` says what happens: `fail` (the node fails: retries, then dead letter, as a
  task), `approve` or `reject` (a decision by the system).
- `wait.event`: wakes when an event is posted on the key `key` computes (an expression, e.g.
  `input.order_id`); the event's payload is the node's output. `first_only`: an event wakes
  only the oldest such waiter, not every one. An optional `timeout_seconds` fails the node,
  or with `on_timeout: "succeed"` lets it go on with a null output.
- `wait.timer`: waits `seconds`, or `until` the time an expression computes (ISO 8601 text
  or Unix seconds).

Expressions are the edge conditions' language (core/conditions.py) over `input` (the run
input) and `output`: the predecessor's output when the node has one predecessor, else its
predecessors' outputs by node id.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import jsonschema

from workflows.core.conditions import Condition, ConditionError
from workflows.core.graph import APPROVAL, EVENT, TIMER

APPROVE, REJECT, FAIL, SUCCEED = "approve", "reject", "fail", "succeed"
ADD, REASSIGN = "add", "reassign"
APPROVED, REJECTED = "approved", "rejected"
MAX_WAIT_SECONDS = 366 * 86400

_NAMES = {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 150}, "maxItems": 100}
_PEOPLE = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"users": _NAMES, "groups": _NAMES, "roles": _NAMES},
}
_SECONDS = {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_WAIT_SECONDS}
_EXPRESSION = {"type": "string", "minLength": 1, "maxLength": 500}

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "title": {"type": "string", "maxLength": 200, "description": "What the approver is asked."},
        "instructions": {"type": "string", "maxLength": 5000},
        "form": {
            "type": "object",
            "description": "JSON schema of the decision's fields beyond approve/reject.",
        },
        "propose": {
            **_EXPRESSION,
            "description": "Data proposed to the approver, who may edit it: an expression, e.g. output.draft.",
        },
        "show_input": {
            "type": "boolean",
            "default": True,
            "description": "Show the run input to the approver.",
        },
        "show_upstream": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Predecessors whose outputs the approver sees.",
        },
        "approvers": {**_PEOPLE, "description": "Who may decide: users, groups, roles. None: any operator."},
        "due_seconds": {**_SECONDS, "description": "The SLA: due this long after the node starts waiting."},
        "escalate_to": {**_PEOPLE, "description": "Who is asked once the SLA has passed."},
        "escalation": {"enum": [ADD, REASSIGN], "default": ADD},
        "timeout_seconds": {**_SECONDS, "description": "After this long the approval times out."},
        "on_timeout": {"enum": [FAIL, APPROVE, REJECT], "default": FAIL},
    },
}
EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["key"],
    "properties": {
        "key": {**_EXPRESSION, "description": "The event key, computed from the data, e.g. input.order_id."},
        "first_only": {
            "type": "boolean",
            "default": False,
            "description": "An event wakes only the oldest waiter.",
        },
        "timeout_seconds": _SECONDS,
        "on_timeout": {"enum": [FAIL, SUCCEED], "default": FAIL},
    },
}
TIMER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "seconds": {**_SECONDS, "description": "Wait this long."},
        "until": {
            **_EXPRESSION,
            "description": "Or wait until this time (ISO 8601 or Unix seconds), e.g. input.send_at.",
        },
    },
}
SCHEMAS: dict[str, dict[str, Any]] = {APPROVAL: APPROVAL_SCHEMA, EVENT: EVENT_SCHEMA, TIMER: TIMER_SCHEMA}
DOCS = {
    APPROVAL: "Wait for a person to approve or reject, with a form, an SLA and escalation.",
    EVENT: "Wait for an event posted on a key computed from the data; its payload is the output.",
    TIMER: "Wait for a duration, or until a time computed from the data.",
}


def check_config(kind: str, config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Return (field, message) for what the schema cannot say: expressions, the form, one of
    seconds/until. The schema itself is checked by the definition's handler check."""
    problems: list[tuple[str, str]] = []
    for name in ("key", "propose", "until"):
        if isinstance(config.get(name), str):
            try:
                Condition(config[name])
            except ConditionError as err:
                problems.append((name, f"is not a valid expression: {err}"))
    if kind == APPROVAL and isinstance(config.get("form"), dict):
        try:
            jsonschema.Draft202012Validator.check_schema(config["form"])
        except jsonschema.SchemaError as err:
            problems.append(("form", f"is not a valid JSON schema: {err.message}"))
    if kind == TIMER and ("seconds" in config) == ("until" in config):
        problems.append(("seconds", "give exactly one of seconds or until"))
    return problems


@dataclass(frozen=True)
class WaitPlan:
    """What a node that starts waiting waits for, computed from its config and its data."""

    kind: str
    key: str = ""  # wait.event: the event key
    proposed: Any = None  # human.approval: the data proposed for editing
    sla_at: datetime | None = None  # human.approval: when it is due (shown, sorted on)
    escalate_at: datetime | None = None  # the SLA, when there is someone to escalate to
    expires_at: datetime | None = None  # a timer's end; a timeout
    error: str = ""  # the data could not give what the config asks (the node fails)

    @property
    def next_deadline(self) -> datetime | None:
        """The first deadline: the escalation while it is ahead, else the expiry."""
        return self.escalate_at or self.expires_at


def expression_output(upstream: Mapping[str, Any], predecessors: tuple[str, ...]) -> Any:
    """`output` in a wait node's expressions: the sole predecessor's output, else all by id."""
    if len(predecessors) == 1:
        return upstream.get(predecessors[0])
    return {p: upstream.get(p) for p in predecessors}


def plan_wait(kind: str, config: Mapping[str, Any], run_input: Any, output: Any, now: datetime) -> WaitPlan:
    """Decide what a node of `kind` waits for, starting `now`."""
    expires = after(now, config.get("timeout_seconds"))
    if kind == APPROVAL:
        proposed = Condition(config["propose"]).value(output, run_input) if config.get("propose") else None
        sla = after(now, config.get("due_seconds"))
        escalate = sla if config.get("escalate_to") else None
        return WaitPlan(kind, proposed=proposed, sla_at=sla, escalate_at=escalate, expires_at=expires)
    if kind == EVENT:
        key = Condition(config["key"]).value(output, run_input)
        if key is None or isinstance(key, (dict, list)) or key == "":
            return WaitPlan(kind, error=f"the event key {config['key']!r} gives {key!r}: no key to wait on")
        return WaitPlan(kind, key=event_key(key), expires_at=expires)
    if kind == TIMER:
        if "seconds" in config:
            return WaitPlan(kind, expires_at=after(now, config["seconds"]))
        end = parse_time(Condition(config["until"]).value(output, run_input))
        if end is None:
            return WaitPlan(kind, error=f"until {config['until']!r} gives no time (ISO 8601 or Unix seconds)")
        return WaitPlan(kind, expires_at=end)
    raise ValueError(f"{kind!r} is not a kind of wait")


def event_key(value: Any) -> str:
    """The text of an event key: strings as they are, numbers and booleans as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)


def after(now: datetime, seconds: Any) -> datetime | None:
    return now + timedelta(seconds=float(seconds)) if seconds else None


def parse_time(value: Any) -> datetime | None:
    """A time from ISO 8601 text (UTC unless it says) or Unix seconds; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value, tz=UTC)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


def timeout_outcome(kind: str, config: Mapping[str, Any]) -> str:
    """What a deadline does to a waiting node: `succeed`, `approve`, `reject` or `fail`."""
    if kind == TIMER:
        return SUCCEED
    return str(config.get("on_timeout", FAIL))


def form_errors(form: Mapping[str, Any] | None, fields: Any) -> list[tuple[str, str]]:
    """Check a decision's fields against the form's schema: (field path, message) each."""
    if not isinstance(fields, dict):
        return [("fields", "must be a JSON object")]
    if not form:
        return []
    validator = jsonschema.Draft202012Validator(form)
    errors = sorted(validator.iter_errors(fields), key=lambda e: list(map(str, e.absolute_path)))
    return [(".".join(["fields", *map(str, e.absolute_path)]), e.message) for e in errors]


def edits_of(proposed: Any, submitted: Any) -> dict[str, Any]:
    """What the approver changed of the proposed data: {key: {"from", "to"}} for objects."""
    if submitted is None or submitted == proposed:
        return {}
    if isinstance(proposed, dict) and isinstance(submitted, dict):
        keys = sorted(set(proposed) | set(submitted))
        return {
            k: {"from": proposed.get(k), "to": submitted.get(k)}
            for k in keys
            if proposed.get(k) != submitted.get(k)
        }
    return {"": {"from": proposed, "to": submitted}}
