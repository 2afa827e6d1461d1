"""Turn a workflow definition (JSON) into a validated, immutable Graph.

This module is part of the pure core: standard library, pydantic and jsonschema only (plus
``workflows.core.graph`` and ``workflows.core.conditions``), so the same code runs in the web process,
the scheduler and every worker, and tests run in milliseconds. ``validate_definition``
reports every problem it can find at once, each with a JSON path
(``nodes[2].retry.max_attempts``) that an editor can pin to a field; ``parse_definition``
returns a ``workflows.core.graph.Graph`` or raises ``DefinitionError`` with those issues.

Definition order matters to the Graph (it breaks ties in its roots and order and orders
predecessors), so ``normalise`` and ``checksum`` keep list order and only canonicalise
key order, number spelling (``30`` and ``30.0``) and defaults.
"""

from __future__ import annotations

import difflib
import graphlib
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from workflows.core.conditions import Condition, ConditionError
from workflows.core.contracts import (
    INPUT_UNDECLARED,
    declared_fields,
    item_placeholders,
    template_gaps,
    unprovided_fields,
)
from workflows.core.egress import EgressPolicy, literal_refusal
from workflows.core.engine import JOIN_RULES
from workflows.core.flowcontrol import MAX_KEY_CHARS, WORKFLOW_SCOPE, Concurrency, StartKey, check_key_path
from workflows.core.graph import (
    AGENT,
    CHILD,
    COMPENSATE_SUFFIX,
    DEFAULT_JOIN,
    MAP,
    TASK,
    WAIT_KINDS,
    Edge,
    Graph,
    Node,
    RateLimit,
    RetryPolicy,
)
from workflows.core.maps import MAX_PARALLEL, check_map
from workflows.core.waits import check_config as check_wait_config

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

# The same three names as Literal["all_success", ...], read from the engine's table; a
# Literal gives the schema its enum and pydantic its "should be 'all_success', ..." message.
JoinRule = Literal[JOIN_RULES]  # type: ignore[valid-type]  # a Literal of the JOIN_RULES tuple: mypy cannot evaluate a Literal built at import
NODE_ID_PATTERN: Final = r"^[A-Za-z_][A-Za-z0-9_\-]{0,63}$"
QUEUE_PATTERN: Final = r"^[a-z][a-z0-9_-]{0,39}$"
MAX_CYCLES_REPORTED: Final = 5
MAX_NESTING_DEPTH: Final = 64
_JSON_TYPES: Final[Mapping[type, str]] = {
    type(None): "null",
    bool: "a boolean",
    int: "a number",
    float: "a number",
    str: "a string",
    list: "an array",
    dict: "an object",
}
_PATTERN_HINTS: Final[Mapping[str | int, str]] = {  # keyed by a pydantic loc's last item
    "id": "must start with a letter or '_' and contain only letters, digits, '_' and '-'"
    " (at most 64 characters)",
    "queue": "must start with a lowercase letter and contain only lowercase letters,"
    " digits, '_' and '-' (at most 40 characters)",
}

HandlerSchemas = Mapping[str, Mapping[str, Any] | None]
LLM_HANDLER_PREFIX: Final = "llm."
EGRESS_URL_HANDLERS: Final = frozenset({"http.request"})
_ConfigValidator = jsonschema.Draft202012Validator | str


@dataclass(frozen=True)
class Limits:
    """Bound a definition: its size, so one request cannot exhaust a process, and the
    queues it may name (those that have workers), when known."""

    max_nodes: int = 2000
    max_edges: int = 10000
    max_config_bytes: int = 16384
    max_definition_bytes: int = 1_048_576
    queues: tuple[str, ...] | None = None
    # LLM providers a node may name: name -> the models it offers (empty: any model), and
    # the provider of nodes that name none. None: providers are not checked.
    llm_providers: Mapping[str, tuple[str, ...]] | None = None
    llm_default_provider: str | None = None
    # Where nodes may send requests (http.request's url); None: URLs are not checked.
    egress: EgressPolicy | None = None


DEFAULT_LIMITS: Final = Limits()


@dataclass(frozen=True)
class Issue:
    """Describe one problem; ``path`` is a JSON path, or "" for the whole document.

    ``code`` says what kind of problem it is (a word a program may branch on: "cycle",
    "unknown_handler", ...); ``node`` names the node it belongs to when that is known;
    ``cycle`` lists a cycle's node ids in edge direction, the first repeated at the end;
    ``input_field`` names the run-input field a placeholder needs that the input schema does
    not declare (the editor offers to add it).
    """

    path: str
    message: str
    code: str = "invalid"
    node: str | None = None
    cycle: tuple[str, ...] | None = None
    input_field: str | None = None

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message

    def as_problem(self) -> dict[str, Any]:
        """Return the issue as one item of a problem+json ``errors`` list."""
        problem: dict[str, Any] = {
            "code": self.code,
            "message": self.message,
            "node": self.node,
            "field": self.path,
        }
        if self.cycle is not None:
            problem["cycle"] = list(self.cycle)
        if self.input_field is not None:
            problem["input_field"] = self.input_field
        return problem


class DefinitionError(ValueError):
    """Reject a definition, carrying every issue found."""

    def __init__(self, issues: Sequence[Issue]) -> None:
        self.issues: list[Issue] = list(issues)
        super().__init__("; ".join(str(issue) for issue in self.issues))


# --- schema -------------------------------------------------------------------------------

_STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)


class RetrySpec(BaseModel):
    """Validate a node's ``retry`` object."""

    model_config = _STRICT
    max_attempts: int = Field(default=1, ge=1, le=50)
    backoff_seconds: float = Field(default=1.0, ge=0)
    backoff_max_seconds: float = Field(default=300.0, ge=0)
    jitter: float = Field(default=0.1, ge=0, le=1)


class RateLimitSpec(BaseModel):
    """Validate a node's ``rate_limit`` object."""

    model_config = _STRICT
    count: int = Field(ge=1, le=100_000)
    per_seconds: float = Field(ge=0.1, le=86_400)


class CompensateSpec(BaseModel):
    """Validate a node's ``compensate`` object: the handler that undoes it (a saga step)."""

    model_config = _STRICT
    handler: str = Field(min_length=1, max_length=200)
    config: dict[str, Any] = Field(default_factory=dict)
    retry: RetrySpec = Field(default_factory=RetrySpec)
    timeout_seconds: float = Field(default=300.0, gt=0, le=86400)


class ConcurrencySpec(BaseModel):
    """Validate a ``concurrency`` object: at most ``limit`` in flight per key value (core/flowcontrol.py)."""

    model_config = _STRICT
    key: str = Field(min_length=1, max_length=200)
    limit: int = Field(ge=1, le=10_000)
    default: str = Field(default="", max_length=MAX_KEY_CHARS)


class DebounceSpec(BaseModel):
    """Validate a workflow's ``debounce``: a start with the same key within the window replaces the waiting one."""

    model_config = _STRICT
    key: str = Field(min_length=1, max_length=200)
    window_s: float = Field(gt=0, le=86_400)
    default: str = Field(default="", max_length=MAX_KEY_CHARS)


class SingletonSpec(BaseModel):
    """Validate a workflow's ``singleton``: one active run per key; later starts skipped or queued."""

    model_config = _STRICT
    key: str = Field(min_length=1, max_length=200)
    mode: Literal["skip", "queue"] = "skip"
    default: str = Field(default="", max_length=MAX_KEY_CHARS)


class NodeSpec(BaseModel):
    """Validate one entry of ``nodes``."""

    model_config = _STRICT
    id: str = Field(pattern=NODE_ID_PATTERN)
    handler: str = Field(min_length=1, max_length=200)
    config: dict[str, Any] = Field(default_factory=dict)
    retry: RetrySpec = Field(default_factory=RetrySpec)
    timeout_seconds: float = Field(default=300.0, gt=0, le=86400)
    queue: str = Field(default="default", pattern=QUEUE_PATTERN)
    join: JoinRule = DEFAULT_JOIN
    max_in_flight: int | None = Field(default=None, ge=1, le=10_000)
    rate_limit: RateLimitSpec | None = None
    map: str | None = Field(default=None, min_length=1, max_length=500)
    max_parallel: int | None = Field(default=None, ge=1, le=MAX_PARALLEL)
    on_item_failure: Literal["fail", "continue"] | None = None
    compensate: CompensateSpec | None = None
    concurrency: ConcurrencySpec | None = None


# Node fields written into the normalised definition only when set, so that definitions
# saved before the field existed keep their checksums.
_OMITTED_WHEN_UNSET = frozenset(
    {"max_in_flight", "rate_limit", "map", "max_parallel", "on_item_failure", "compensate", "concurrency"}
)


def _node_json(spec: NodeSpec) -> dict[str, Any]:
    unset = {name for name in _OMITTED_WHEN_UNSET if getattr(spec, name) is None}
    return spec.model_dump(mode="json", exclude=unset)


class EdgeSpec(BaseModel):
    """Validate one entry of ``edges``; a blank ``when`` means no condition."""

    model_config = _STRICT
    source: str
    target: str
    when: str | None = None

    @field_validator("when")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return value if value and value.strip() else None


class DocumentSpec(BaseModel):
    """Validate the top level; items are validated one by one to report them all.

    ``input_schema`` is the JSON schema (draft 2020-12) a run's input must match: a start
    with other input is refused naming each field (``check_run_input``), and the start
    dialog draws its form from it. Absent, any JSON object is accepted.
    """

    model_config = _STRICT
    nodes: list[Any]
    edges: list[Any] = Field(default_factory=list)
    description: str = ""
    input_schema: dict[str, Any] | None = None
    concurrency: ConcurrencySpec | None = None
    debounce: DebounceSpec | None = None
    singleton: SingletonSpec | None = None


# Document fields written into the normalised definition only when set (older checksums hold).
_FLOW_FIELDS: Final = ("concurrency", "debounce", "singleton")


_SpecT = TypeVar("_SpecT", bound=BaseModel)


@dataclass
class _Draft:
    """Collect what could be read from a definition, valid parts and raw ids alike."""

    description: str = ""
    input_schema: dict[str, Any] | None = None
    flow: dict[str, Any] = field(default_factory=dict)  # the set ones of _FLOW_FIELDS, as specs
    raw_nodes: list[Any] = field(default_factory=list)
    raw_edges: list[Any] = field(default_factory=list)
    nodes: dict[int, NodeSpec] = field(default_factory=dict)
    edges: dict[int, EdgeSpec] = field(default_factory=dict)
    conditions: dict[int, Condition] = field(default_factory=dict)


# --- public entry points ------------------------------------------------------------------


def validate_definition(
    data: object, handlers: HandlerSchemas | None = None, limits: Limits = DEFAULT_LIMITS
) -> list[Issue]:
    """Return every problem with a definition; an empty list means it is valid.

    ``handlers`` maps registered handler names to their config JSON schema (or None for
    "any config"); when it is None, handler names and configs are not checked.
    """
    return _inspect(data, handlers, limits)[0]


def parse_definition(
    data: object, handlers: HandlerSchemas | None = None, limits: Limits = DEFAULT_LIMITS
) -> Graph:
    """Validate a definition and build its Graph, or raise DefinitionError."""
    issues, draft = _inspect(data, handlers, limits)
    if issues or draft is None:
        raise DefinitionError(issues)
    return _build_graph(draft)


def template_warnings(data: object, outputs: Mapping[str, Any]) -> list[Issue]:
    """Return what the definition's placeholders name that nothing is sure to provide.

    Warnings, not problems: a save is not refused for them (core/contracts.template_gaps).
    `outputs` maps node ids to an output each is known to give (from a recent run).
    """
    issues = []
    for gap in template_gaps(data, outputs):
        path = _format_path(("nodes", gap.position, "config", *gap.where))
        field_name = gap.field if gap.code == INPUT_UNDECLARED else None
        issues.append(Issue(path, gap.message, gap.code, gap.node, input_field=field_name))
    return issues


def normalise(data: object) -> dict[str, Any]:
    """Return the definition as plain JSON with every default filled in.

    Only the document and the schema are checked (a draft with a cycle still normalises,
    and no size limit applies); a problem raises DefinitionError.
    """
    issues = _check_document(data, None)
    if issues:
        raise DefinitionError(issues)
    issues, draft = _read_definition(data)
    if issues:
        raise DefinitionError(issues)
    normalised: dict[str, Any] = {
        "description": draft.description,
        "nodes": [_node_json(spec) for spec in draft.nodes.values()],
        "edges": [spec.model_dump(mode="json") for spec in draft.edges.values()],
    }
    if draft.input_schema is not None:  # only when set: older definitions keep their checksums
        normalised["input_schema"] = draft.input_schema
    for name, spec in draft.flow.items():
        normalised[name] = spec.model_dump(mode="json")
    return normalised


def canonical_json(data: object) -> str:
    """Serialise with sorted keys and compact separators; NaN and Infinity are refused."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def checksum(data: object) -> str:
    """Return "sha256:<hex>" of the normalised definition."""
    digest = hashlib.sha256(canonical_json(normalise(data)).encode()).hexdigest()
    return f"sha256:{digest}"


# --- validation steps ---------------------------------------------------------------------


def _inspect(
    data: object, handlers: HandlerSchemas | None, limits: Limits
) -> tuple[list[Issue], _Draft | None]:
    """Run every check that applies and return the issues with the parsed draft."""
    document_issues = _check_document(data, limits)
    if document_issues:
        return document_issues, None
    issues, draft = _read_definition(data)
    issues += _check_counts(draft, limits)
    issues += _check_config_sizes(draft, limits)
    issues += _check_node_ids(draft)
    issues += _check_edges(draft)
    issues += _check_cycles(draft)
    issues += _check_conditions(draft)
    schema_issues = _check_input_schema(draft)
    issues += schema_issues or _check_input_placeholders(draft)
    if handlers is not None:
        issues += _check_handlers(draft, handlers)
    issues += _check_waits(draft)
    issues += _check_maps(draft)
    issues += _check_item_placeholders(draft)
    issues += _check_flow_keys(draft)
    if limits.queues is not None:
        issues += _check_queues(draft, limits.queues)
    if limits.llm_providers is not None:
        issues += _check_llm_providers(draft, limits.llm_providers, limits.llm_default_provider)
    if limits.egress is not None:
        issues += _check_egress(draft, limits.egress)
    return issues, draft


def _check_egress(draft: _Draft, policy: EgressPolicy) -> list[Issue]:
    """Report `http.request` URLs whose host, as written, the egress policy refuses."""
    issues: list[Issue] = []
    for index, spec in draft.nodes.items():
        url = spec.config.get("url") if spec.handler in EGRESS_URL_HANDLERS else None
        refusal = literal_refusal(url, policy) if isinstance(url, str) else None
        if refusal is not None:
            issues.append(
                Issue(
                    f"nodes[{index}].config.url", f"{refusal} (node '{spec.id}')", "egress_refused", spec.id
                )
            )
    return issues


def _check_llm_providers(
    draft: _Draft, providers: Mapping[str, tuple[str, ...]], default: str | None
) -> list[Issue]:
    """Report LLM nodes (`llm.*`) naming a provider that does not exist or a model it does
    not offer, in `provider`/`model` or in any of their `fallbacks`."""
    issues: list[Issue] = []
    for index, spec in draft.nodes.items():
        if not spec.handler.startswith(LLM_HANDLER_PREFIX):
            continue
        pairs = [("config.", spec.config.get("provider") or default, spec.config.get("model"))]
        fallbacks = spec.config.get("fallbacks")
        for n, pair in enumerate(fallbacks if isinstance(fallbacks, list) else []):
            if isinstance(pair, dict):
                pairs.append((f"config.fallbacks[{n}].", pair.get("provider"), pair.get("model")))
        for prefix, provider, model in pairs:
            issues += _provider_issues(f"nodes[{index}].{prefix}", spec.id, provider, model, providers)
    return issues


def _provider_issues(
    field: str, node_id: str, provider: Any, model: Any, providers: Mapping[str, tuple[str, ...]]
) -> list[Issue]:
    """Report one provider/model pair (at `field`, a prefix ending in a dot) that does not exist."""
    if not isinstance(provider, str) or provider not in providers:
        if not isinstance(provider, str):
            return []
        known = ", ".join(sorted(providers)) or "none"
        text = f"unknown LLM provider {provider!r} (node '{node_id}'); providers: {known}"
        return [Issue(f"{field}provider", text, "unknown_provider", node_id)]
    offered = providers[provider]
    if isinstance(model, str) and offered and model not in offered:
        text = (
            f"provider {provider!r} does not offer model {model!r} (node '{node_id}'); "
            f"it offers {', '.join(offered)}"
        )
        return [Issue(f"{field}model", text, "unknown_model", node_id)]
    return []


def _check_queues(draft: _Draft, queues: tuple[str, ...]) -> list[Issue]:
    """Report nodes sent to a queue no worker listens on: they would wait forever."""
    return [
        Issue(
            f"nodes[{index}].queue",
            f"queue {spec.queue!r} has no workers; use one of: {', '.join(queues)}",
            "queue_without_workers",
            spec.id,
        )
        for index, spec in draft.nodes.items()
        if spec.queue not in queues
    ]


def _check_document(data: object, limits: Limits | None) -> list[Issue]:
    """Refuse non-objects, over-nested or non-JSON values and oversized documents before parsing.

    The depth check comes first: json and pydantic both give up on deep nesting with
    errors of their own (RecursionError, "maximum depth exceeded").
    """
    if not isinstance(data, dict):
        return [Issue("", f"definition must be a JSON object, not {_json_type(data)}", "not_an_object")]
    if _is_too_deep(data, MAX_NESTING_DEPTH):
        return [Issue("", f"definition is nested more than {MAX_NESTING_DEPTH} levels deep", "too_deep")]
    try:
        size = len(canonical_json(data).encode())
    except (TypeError, ValueError) as err:
        return [Issue("", f"definition is not valid JSON: {err}", "not_json")]
    if limits is not None and size > limits.max_definition_bytes:
        limit = limits.max_definition_bytes
        return [Issue("", f"definition is {size} bytes; the limit is {limit} bytes", "too_large")]
    return []


def _is_too_deep(data: object, max_depth: int) -> bool:
    """Tell whether objects and arrays nest deeper than max_depth, without recursing."""
    stack: list[tuple[object, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > max_depth:
            return True
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _read_definition(data: object) -> tuple[list[Issue], _Draft]:
    """Validate the schema, keeping every node and edge that is valid on its own."""
    draft = _Draft()
    if not isinstance(data, dict):
        return [
            Issue("", f"definition must be a JSON object, not {_json_type(data)}", "not_an_object")
        ], draft
    document, issues = _validate(DocumentSpec, data, ())
    draft.description = document.description if document else ""
    draft.input_schema = document.input_schema if document else None
    if document is not None:
        draft.flow = {
            name: getattr(document, name) for name in _FLOW_FIELDS if getattr(document, name) is not None
        }
    draft.raw_nodes = _list_field(data, "nodes")
    draft.raw_edges = _list_field(data, "edges")
    if "nodes" in data and not draft.raw_nodes and isinstance(data["nodes"], list):
        issues.append(Issue("nodes", "must contain at least one node", "no_nodes"))
    issues += _read_items(draft.raw_nodes, NodeSpec, "nodes", draft.nodes)
    issues += _read_items(draft.raw_edges, EdgeSpec, "edges", draft.edges)
    return issues, draft


def _list_field(data: Mapping[str, Any], key: str) -> list[Any]:
    """Return a top-level list, or [] when it is absent or not a list."""
    value = data.get(key)
    return value if isinstance(value, list) else []


def _read_items(raw_items: list[Any], model: type[BaseModel], name: str, into: dict[int, Any]) -> list[Issue]:
    """Validate list items one by one, storing the valid ones by index."""
    issues: list[Issue] = []
    for index, raw in enumerate(raw_items):
        spec, item_issues = _validate(model, raw, (name, index))
        issues += item_issues
        if spec is not None:
            into[index] = spec
    return issues


def _validate(
    model: type[_SpecT], raw: object, prefix: tuple[str | int, ...]
) -> tuple[_SpecT | None, list[Issue]]:
    """Validate raw data against a model, turning pydantic errors into issues."""
    if not isinstance(raw, dict):
        return None, [
            Issue(_format_path(prefix), f"must be an object, not {_json_type(raw)}", "not_an_object")
        ]
    try:
        return model.model_validate(raw), []
    except ValidationError as err:
        is_node = prefix[:1] == ("nodes",)
        suffix, node = (_node_suffix(raw), _node_id(raw)) if is_node else ("", None)
        return None, [
            Issue(_format_path(prefix + tuple(e["loc"])), _schema_message(e) + suffix, _schema_code(e), node)
            for e in err.errors()
        ]


def _schema_message(error: ErrorDetails) -> str:
    """Word a pydantic error for a person, replacing regex patterns with a plain rule."""
    field_name = error["loc"][-1] if error["loc"] else ""
    if error["type"] == "string_pattern_mismatch" and field_name in _PATTERN_HINTS:
        return f"{_PATTERN_HINTS[field_name]}, got {error['input']!r}"
    if error["type"] == "missing":
        return "is required"
    if error["type"] == "extra_forbidden":
        return f"unknown field '{field_name}'"
    return str(error["msg"])


def _schema_code(error: ErrorDetails) -> str:
    """Name the kind of a schema error: required, unknown_field or invalid_value."""
    return {"missing": "required", "extra_forbidden": "unknown_field"}.get(error["type"], "invalid_value")


def _node_suffix(raw: Mapping[str, Any]) -> str:
    """Name the node an issue belongs to, when its id is readable."""
    node_id = _node_id(raw)
    return f" (node '{node_id}')" if node_id else ""


def _node_id(raw: Mapping[str, Any]) -> str | None:
    """Return a raw node's id when it is readable, else None."""
    node_id = raw.get("id")
    return node_id if isinstance(node_id, str) and node_id else None


def _check_counts(draft: _Draft, limits: Limits) -> list[Issue]:
    """Enforce the node and edge count limits."""
    issues: list[Issue] = []
    if len(draft.raw_nodes) > limits.max_nodes:
        message = f"too many nodes: {len(draft.raw_nodes)}; the limit is {limits.max_nodes}"
        issues.append(Issue("nodes", message, "too_many_nodes"))
    if len(draft.raw_edges) > limits.max_edges:
        message = f"too many edges: {len(draft.raw_edges)}; the limit is {limits.max_edges}"
        issues.append(Issue("edges", message, "too_many_edges"))
    return issues


def _check_config_sizes(draft: _Draft, limits: Limits) -> list[Issue]:
    """Enforce the per-node config size limit (bytes of canonical JSON)."""
    issues: list[Issue] = []
    for index, raw in _dict_items(draft.raw_nodes):
        config, path = raw.get("config"), f"nodes[{index}].config"
        try:
            size = len(canonical_json(config).encode())
        except (TypeError, ValueError) as err:
            message = f"config is not valid JSON: {err}{_node_suffix(raw)}"
            issues.append(Issue(path, message, "config_not_json", _node_id(raw)))
            continue
        if size > limits.max_config_bytes:
            message = f"config is {size} bytes; the limit is {limits.max_config_bytes}{_node_suffix(raw)}"
            issues.append(Issue(path, message, "config_too_large", _node_id(raw)))
    return issues


def _dict_items(raw_items: list[Any]) -> list[tuple[int, dict[str, Any]]]:
    """Return the items that are objects, with their index, whatever else is wrong with them."""
    return [(index, raw) for index, raw in enumerate(raw_items) if isinstance(raw, dict)]


def _raw_ids(draft: _Draft) -> dict[int, str]:
    """Return readable node ids by index, even from nodes with other schema errors."""
    return {index: raw["id"] for index, raw in _dict_items(draft.raw_nodes) if isinstance(raw.get("id"), str)}


def _check_node_ids(draft: _Draft) -> list[Issue]:
    """Report each repeated node id at its second (and later) occurrence."""
    first_seen: dict[str, int] = {}
    issues: list[Issue] = []
    for index, node_id in _raw_ids(draft).items():
        if node_id in first_seen:
            message = f"duplicate node id '{node_id}' (first used by nodes[{first_seen[node_id]}])"
            issues.append(Issue(f"nodes[{index}].id", message, "duplicate_node_id", node_id))
        first_seen.setdefault(node_id, index)
    return issues


def _check_edges(draft: _Draft) -> list[Issue]:
    """Report edges to unknown nodes, self-loops and repeated edges."""
    known = set(_raw_ids(draft).values())
    first_seen: dict[tuple[str, str], int] = {}
    issues: list[Issue] = []
    for index, edge in draft.edges.items():
        issues += _check_edge_ends(index, edge, known)
        pair = (edge.source, edge.target)
        if edge.source == edge.target:
            message = f"edge {edge.source} -> {edge.target} is a self-loop; a node cannot follow itself"
            issues.append(Issue(f"edges[{index}]", message, "self_loop", edge.source))
        elif pair in first_seen:
            message = (
                f"duplicate edge {edge.source} -> {edge.target} (first given as edges[{first_seen[pair]}])"
            )
            issues.append(Issue(f"edges[{index}]", message, "duplicate_edge"))
        first_seen.setdefault(pair, index)
    return issues


def _check_edge_ends(index: int, edge: EdgeSpec, known: set[str]) -> list[Issue]:
    """Report an edge's source or target that names no node."""
    return [
        Issue(f"edges[{index}].{end}", f"{end} '{node_id}' is not a node in this definition", "unknown_node")
        for end, node_id in (("source", edge.source), ("target", edge.target))
        if node_id not in known
    ]


def _check_cycles(draft: _Draft) -> list[Issue]:
    """Report cycles as "a -> b -> a" paths, breaking each found cycle to look for more."""
    order: dict[str, int] = {}
    for index, node_id in _raw_ids(draft).items():
        order.setdefault(node_id, index)
    predecessors: dict[str, list[str]] = {node_id: [] for node_id in order}
    for edge in draft.edges.values():
        joins_two_nodes = edge.source != edge.target and {edge.source, edge.target} <= order.keys()
        if joins_two_nodes and edge.source not in predecessors[edge.target]:
            predecessors[edge.target].append(edge.source)
    issues: list[Issue] = []
    while len(issues) < MAX_CYCLES_REPORTED:
        cycle = _find_cycle(predecessors)
        if cycle is None:
            break
        cycle = _rotate_cycle(cycle, order)
        issues.append(Issue("edges", "cycle: " + " -> ".join(cycle), "cycle", cycle=tuple(cycle)))
        predecessors[cycle[-1]].remove(cycle[-2])  # the edge back into the earliest node
    return issues


def _find_cycle(predecessors: Mapping[str, list[str]]) -> list[str] | None:
    """Return one cycle as [a, b, ..., a] in edge direction, or None if acyclic."""
    try:
        graphlib.TopologicalSorter(predecessors).prepare()
    except graphlib.CycleError as err:
        return list(err.args[1])
    return None


def _rotate_cycle(cycle: list[str], order: Mapping[str, int]) -> list[str]:
    """Start a cycle at its earliest-defined node so reports are stable."""
    ring = cycle[:-1]
    start = min(range(len(ring)), key=lambda i: order[ring[i]])
    ring = ring[start:] + ring[:start]
    return [*ring, ring[0]]


def _check_conditions(draft: _Draft) -> list[Issue]:
    """Parse every edge condition, keeping the parsed ones on the draft."""
    issues: list[Issue] = []
    for index, raw in _dict_items(draft.raw_edges):
        when = raw.get("when")
        if not isinstance(when, str) or not when.strip():
            continue
        try:
            draft.conditions[index] = Condition(when)
        except ConditionError as err:
            issues.append(Issue(f"edges[{index}].when", str(err), "invalid_condition"))
    return issues


def _check_input_schema(draft: _Draft) -> list[Issue]:
    """Report an ``input_schema`` that is not a draft 2020-12 JSON schema, naming where."""
    if draft.input_schema is None:
        return []
    try:
        jsonschema.Draft202012Validator.check_schema(draft.input_schema)
    except jsonschema.SchemaError as err:
        path = _format_path(("input_schema", *err.path))
        return [
            Issue(path, f"input_schema is not a valid JSON schema: {err.message}", "invalid_input_schema")
        ]
    return []


def _check_input_placeholders(draft: _Draft) -> list[Issue]:
    """Report `{input.X}` placeholders whose field X the input schema does not declare (core/contracts.py)."""
    issues = []
    for index, raw in _dict_items(draft.raw_nodes):
        for found in unprovided_fields(raw.get("config"), draft.input_schema):
            message = (
                f"{found.placeholder} names `{found.field}`, which the input schema does not declare: "
                f"add `{found.field}` to input_schema.properties (and to required when every run must "
                f"carry it), or fix the placeholder{_node_suffix(raw)}"
            )
            path = _format_path(("nodes", index, "config", *found.where))
            issues.append(Issue(path, message, "input_not_in_schema", _node_id(raw), input_field=found.field))
    return issues


def check_run_input(schema: Mapping[str, Any] | None, run_input: object) -> list[Issue]:
    """Return how a run input breaks a definition's ``input_schema`` (paths "input.<field>").

    A missing required property is reported at the property's own path, so that a form can
    show it beside its field.
    """
    if schema is None:
        return []
    validator = jsonschema.Draft202012Validator(schema)
    issues = []
    for error in sorted(validator.iter_errors(run_input), key=lambda e: _format_path(e.absolute_path)):
        path: tuple[str | int, ...] = ("input", *error.absolute_path)
        if error.validator == "required" and isinstance(error.validator_value, list):
            missing = [name for name in error.validator_value if name not in (error.instance or {})]
            issues += [Issue(_format_path((*path, name)), "is required", "required") for name in missing]
            continue
        issues.append(Issue(_format_path(path), error.message, "invalid_input"))
    return issues


def _check_handlers(draft: _Draft, handlers: HandlerSchemas) -> list[Issue]:
    """Report unregistered handlers and configs that break their handler's schema (a node's
    own, and its compensate handler's: `nodes[i].compensate.handler`)."""
    issues: list[Issue] = []
    validators: dict[str, _ConfigValidator] = {}
    for index, raw in _dict_items(draft.raw_nodes):
        issues += _check_handler(index, raw, raw, ("nodes", index), handlers, validators)
        step = raw.get("compensate")
        if isinstance(step, dict):
            issues += _check_compensate(index, raw, step, handlers, validators)
    return issues


def _check_compensate(
    index: int,
    raw: Mapping[str, Any],
    step: Mapping[str, Any],
    handlers: HandlerSchemas,
    validators: dict[str, _ConfigValidator],
) -> list[Issue]:
    """A compensate handler must be a registered task handler: not a wait, not a child run."""
    if step.get("handler") in (*WAIT_KINDS, CHILD):
        message = f"{step['handler']} cannot undo a node; choose a task handler{_node_suffix(raw)}"
        return [Issue(f"nodes[{index}].compensate.handler", message, "invalid_compensate", _node_id(raw))]
    return _check_handler(index, raw, step, ("nodes", index, "compensate"), handlers, validators)


def _check_handler(
    index: int,
    raw: Mapping[str, Any],
    item: Mapping[str, Any],
    prefix: tuple[str | int, ...],
    handlers: HandlerSchemas,
    validators: dict[str, _ConfigValidator],
) -> list[Issue]:
    """Check one `handler` and its `config` (of a node, or of its compensate step)."""
    handler, config = item.get("handler"), item.get("config", {})
    if not isinstance(handler, str) or not handler:
        return []
    path = _format_path(prefix)
    if handler not in handlers:
        message = _unknown_handler(handler, handlers) + _node_suffix(raw)
        return [Issue(f"{path}.handler", message, "unknown_handler", _node_id(raw))]
    schema = handlers[handler]
    if schema is None or not isinstance(config, dict):
        return []
    if handler not in validators:
        validators[handler] = _config_validator(handler, schema)
    return _check_config(prefix, raw, config, validators[handler])


def _check_waits(draft: _Draft) -> list[Issue]:
    """Report what a wait node's config schema cannot: bad expressions, forms, timers."""
    return [
        Issue(
            f"nodes[{index}].config.{name}", f"{name} {message} (node '{spec.id}')", "invalid_config", spec.id
        )
        for index, spec in draft.nodes.items()
        if spec.handler in WAIT_KINDS
        for name, message in check_wait_config(spec.handler, spec.config)
    ]


def _check_maps(draft: _Draft) -> list[Issue]:
    """Report map fields that cannot work: a bad expression, a literal list over the limit,
    a wait node mapped, map settings on a node without `map` (core/maps.py)."""
    return [
        Issue(f"nodes[{index}].{name}", f"{message} (node '{spec.id}')", "invalid_map", spec.id)
        for index, spec in draft.nodes.items()
        for name, message in check_map(spec.handler, spec.map, spec.max_parallel, spec.on_item_failure)
    ]


def _check_item_placeholders(draft: _Draft) -> list[Issue]:
    """Report `{item...}` / `{index}` in a config that is given no item: a node that is not a
    map (core/placeholders.py), or a compensate step (it runs once for the node)."""
    issues = []
    for index, spec in draft.nodes.items():
        configs: list[tuple[tuple[str, ...], dict[str, Any]]] = []
        if _kind_of(spec) != MAP:
            configs.append((("config",), spec.config))
        if spec.compensate is not None:
            configs.append((("compensate", "config"), spec.compensate.config))
        for prefix, config in configs:
            for where, found in item_placeholders(config):
                path = _format_path(("nodes", index, *prefix, *where))
                issues.append(
                    Issue(path, _item_outside_map(found.text, spec, prefix), "item_outside_map", spec.id)
                )
    return issues


def _item_outside_map(placeholder: str, spec: NodeSpec, prefix: tuple[str, ...]) -> str:
    if prefix != ("config",):
        return (
            f"{placeholder}: a compensate step runs once for the node and is given no item; "
            f"remove it (node '{spec.id}')"
        )
    return (
        f"{placeholder} names a map item, but node '{spec.id}' is not a map node; set `map` on it "
        "(map over items in the inspector), or use {input...} / {upstream...} instead"
    )


def _check_flow_keys(draft: _Draft) -> list[Issue]:
    """Report concurrency, debounce and singleton keys that cannot resolve (core/flowcontrol.py)."""
    declared = declared_fields(draft.input_schema)
    issues = [
        Issue(f"{name}.key", problem, "invalid_key")
        for name, spec in draft.flow.items()
        if (problem := check_key_path(spec.key, None, declared)) is not None
    ]
    if "debounce" in draft.flow and "singleton" in draft.flow:
        message = (
            "declare debounce or singleton, not both: a debounced start is already one waiting run per key"
        )
        issues.append(Issue("singleton", message, "invalid_key"))
    sources: dict[str, list[str]] = {}
    for edge in draft.edges.values():
        sources.setdefault(edge.target, []).append(edge.source)
    for index, spec in draft.nodes.items():
        if spec.concurrency is None:
            continue
        problem = check_key_path(spec.concurrency.key, sources.get(spec.id, []), declared)
        if problem is not None:
            issues.append(
                Issue(
                    f"nodes[{index}].concurrency.key", f"{problem} (node '{spec.id}')", "invalid_key", spec.id
                )
            )
    return issues


def _unknown_handler(handler: str, handlers: HandlerSchemas) -> str:
    """Explain an unknown handler, suggesting close and registered names."""
    if not handlers:
        return f"unknown handler '{handler}'; no handlers are registered"
    close = difflib.get_close_matches(handler, list(handlers), n=3)
    known = close + [name for name in sorted(handlers) if name not in close]
    more = f" and {len(known) - 5} more" if len(known) > 5 else ""
    return f"unknown handler '{handler}'; registered handlers include {', '.join(known[:5])}{more}"


def _config_validator(handler: str, schema: Mapping[str, Any]) -> _ConfigValidator:
    """Build a Draft 2020-12 validator for a handler's schema, or say why the schema is broken."""
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as err:
        return f"handler '{handler}' has an invalid config schema: {err.message}"
    return jsonschema.Draft202012Validator(schema)


def _check_config(
    at: tuple[str | int, ...], raw: Mapping[str, Any], config: Any, validator: _ConfigValidator
) -> list[Issue]:
    """Validate a config (at `at`: a node, or its compensate step) with its handler's validator."""
    if isinstance(validator, str):
        return [Issue(_format_path((*at, "handler")), validator, "invalid_handler_schema", _node_id(raw))]
    prefix: tuple[str | int, ...] = (*at, "config")
    errors = sorted(validator.iter_errors(config), key=lambda e: _format_path(e.absolute_path))
    return [
        Issue(
            _format_path(prefix + tuple(e.absolute_path)),
            e.message + _node_suffix(raw),
            "invalid_config",
            _node_id(raw),
        )
        for e in errors
    ]


def _build_graph(draft: _Draft) -> Graph:
    """Turn a fully valid draft into a Graph."""
    nodes = {spec.id: _build_node(spec) for spec in draft.nodes.values()}
    edges = tuple(
        Edge(edge.source, edge.target, draft.conditions.get(index)) for index, edge in draft.edges.items()
    )
    flow = draft.flow
    workflow_wide = _concurrency(flow["concurrency"], WORKFLOW_SCOPE) if "concurrency" in flow else None
    if workflow_wide is not None:  # a node's own concurrency replaces the workflow's for it
        nodes = {
            n: node if node.concurrency is not None else replace(node, concurrency=workflow_wide)
            for n, node in nodes.items()
        }
    debounce, singleton = flow.get("debounce"), flow.get("singleton")
    return Graph(
        nodes=nodes,
        edges=edges,
        input_schema=draft.input_schema,
        debounce=StartKey(debounce.key, window_s=debounce.window_s, default=debounce.default)
        if debounce
        else None,
        singleton=StartKey(singleton.key, mode=singleton.mode, default=singleton.default)
        if singleton
        else None,
    )


def _concurrency(spec: ConcurrencySpec, scope: str) -> Concurrency:
    return Concurrency(spec.key, spec.limit, spec.default, scope)


def _build_node(spec: NodeSpec) -> Node:
    """Turn a node spec into a Node."""
    rate = RateLimit(**spec.rate_limit.model_dump()) if spec.rate_limit is not None else None
    fields = spec.model_dump(exclude={"retry", "rate_limit", "compensate", "concurrency"}, exclude_none=True)
    kind = _kind_of(spec)
    retry = RetryPolicy(**spec.retry.model_dump())
    keyed = _concurrency(spec.concurrency, spec.id) if spec.concurrency is not None else None
    return Node(
        **fields, retry=retry, rate_limit=rate, kind=kind, compensate=_build_step(spec), concurrency=keyed
    )


def _kind_of(spec: NodeSpec) -> str:
    """The node's kind: a wait, agent or child-run handler names its own; else `map` is a map."""
    return spec.handler if spec.handler in (*WAIT_KINDS, AGENT, CHILD) else MAP if spec.map else TASK


def _build_step(spec: NodeSpec) -> Node | None:
    """The node's compensation step as a task node of its own (core/compensation.py)."""
    step = spec.compensate
    if step is None:
        return None
    return Node(
        id=f"{spec.id}{COMPENSATE_SUFFIX}",
        handler=step.handler,
        config=step.config,
        retry=RetryPolicy(**step.retry.model_dump()),
        timeout_seconds=step.timeout_seconds,
        queue=spec.queue,
    )


def _format_path(parts: Iterable[str | int]) -> str:
    """Join path parts as "nodes[2].retry.max_attempts"."""
    path = ""
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part.isidentifier() or not part:
            path += f".{part}" if path else part
        else:
            path += f"[{json.dumps(part, ensure_ascii=False)}]"
    return path


def _json_type(value: object) -> str:
    """Name a value's JSON type for error messages."""
    return _JSON_TYPES.get(type(value), type(value).__name__)
