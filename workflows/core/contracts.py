"""What a definition's templates need of the run input, against its input schema.

Pure. A node's config may name run-input fields in placeholders (`{input.order_id}`, the
templates of llm.chat, llm.agent, http.request and workflow.run: handlers/builtin.py renders
them). When the definition declares an input schema that lists its properties, a placeholder
whose first field is not among them names a field no run that honours the schema is sure
to carry: the definition's validation reports it (core/definition.py), naming the node and
the config field, before a run dies of it. A definition without a schema, or whose schema
lists no properties, is not checked: nothing declares what its input holds.

Decided here: a field the schema lists but does not require is accepted (a run may carry
it); the run-time error for a run that lacks it says what to start the run with. Only the
first field is checked (`{input.customer.email}` needs `customer`): nested schemas are the
author's to keep. `{item...}` and `{index}` name a map node's item (`item_placeholders`):
anywhere but in a map node's config the definition is refused.

Warnings (`template_gaps`): what a placeholder names that nothing is sure to provide, but a
run might still (so a save is not refused). `{input.X}` in a definition that declares no
input properties at all; `{upstream.N...}` where N is no node of the definition, or not a
direct predecessor of the node (a node is given only its predecessors' outputs:
core/compensation.given_by); `{upstream.N.X.Y}` where N's known output (the caller passes
one per node, e.g. from the latest run that reached it) has no X, or X no Y. Paths are
followed through objects only: a list or a scalar ends the check (its shape varies by run).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from workflows.core.placeholders import INPUT, ITEM_ROOTS, UPSTREAM, Placeholder, placeholders_in

# What a Gap is about (the `code` of its warning).
INPUT_UNDECLARED = "input_undeclared"
UPSTREAM_UNKNOWN_NODE = "upstream_unknown_node"
UPSTREAM_NOT_PREDECESSOR = "upstream_not_predecessor"
UPSTREAM_MISSING_FIELD = "upstream_missing_field"


class Unprovided(NamedTuple):
    """A placeholder in a config that names a run-input field the schema does not declare."""

    where: tuple[str | int, ...]  # the path inside the node's config
    field: str
    placeholder: str


def declared_fields(schema: Any) -> set[str] | None:
    """The run-input fields a schema declares, or None when it declares none (not checked)."""
    if not isinstance(schema, Mapping):
        return None
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        return None
    return {str(name) for name in properties}


def unprovided_fields(config: Any, schema: Any) -> list[Unprovided]:
    """The placeholders in `config` whose first run-input field `schema` does not declare."""
    declared = declared_fields(schema)
    if declared is None:
        return []
    found = []
    for where, text in strings_in(config, ()):
        for match in input_fields_in(text):
            name = match.segments[0]
            if name not in declared:
                found.append(Unprovided(where, name, match.text))
    return found


def item_placeholders(config: Any) -> list[tuple[tuple[str | int, ...], Placeholder]]:
    """The `{item...}` and `{index}` placeholders of a config, with their paths: only a map
    node's items are given an item (core/definition.py refuses them anywhere else)."""
    return [(where, p) for where, text in strings_in(config, ()) for p in placeholders_in(text, ITEM_ROOTS)]


def input_fields_in(text: str) -> list[Placeholder]:
    """The `{input.X...}` placeholders of `text` (the whole input, `{input}`, names no field)."""
    return [p for p in placeholders_in(text, (INPUT,)) if p.path]


def strings_in(value: Any, where: tuple[str | int, ...]) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Every string of a JSON value, with its path."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from strings_in(item, (*where, str(key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from strings_in(item, (*where, index))


class Gap(NamedTuple):
    """A placeholder in a node's config that nothing is sure to provide (a warning)."""

    position: int  # the node's index in `nodes`
    node: str
    where: tuple[str | int, ...]  # the path inside the node's config
    code: str
    placeholder: str
    field: str  # the input field, or the dotted path inside the upstream output
    message: str


def template_gaps(definition: Any, outputs: Mapping[str, Any]) -> list[Gap]:
    """The placeholders of every node's config that nothing is sure to provide.

    `outputs` maps a node id to an output it is known to give (absent: unknown, not checked).
    """
    if not isinstance(definition, Mapping):
        return []
    nodes = _nodes_by_index(definition.get("nodes"))
    ids = {node_id for node_id, _ in nodes.values()}
    preds = _predecessors(definition.get("edges"))
    undeclared = declared_fields(definition.get("input_schema")) is None
    gaps = []
    for index, (node_id, config) in nodes.items():
        for where, text in strings_in(config, ()):
            found = (index, node_id, where)
            if undeclared:
                gaps += [_undeclared_input(found, p) for p in input_fields_in(text)]
            for match in placeholders_in(text, (UPSTREAM,)):
                gaps += _upstream_gaps(found, match, ids, preds.get(node_id, set()), outputs)
    return gaps


def _nodes_by_index(raw: Any) -> dict[int, tuple[str, Any]]:
    """Each readable node: its index -> (id, config)."""
    if not isinstance(raw, list):
        return {}
    return {
        i: (str(n["id"]), n.get("config"))
        for i, n in enumerate(raw)
        if isinstance(n, Mapping) and isinstance(n.get("id"), str)
    }


def _predecessors(raw: Any) -> dict[str, set[str]]:
    """Each node id -> the ids of the nodes with an edge into it."""
    preds: dict[str, set[str]] = {}
    for edge in raw if isinstance(raw, list) else []:
        if isinstance(edge, Mapping) and isinstance(edge.get("source"), str):
            preds.setdefault(str(edge.get("target")), set()).add(edge["source"])
    return preds


def _undeclared_input(found: tuple[int, str, tuple[str | int, ...]], match: Placeholder) -> Gap:
    name = match.segments[0]
    message = (
        f"{match.text} names `{name}`, but the definition declares no input schema: a run started "
        f"without `{name}` fails at node '{found[1]}'; add `{name}` to the input schema"
    )
    return Gap(*found, INPUT_UNDECLARED, match.text, name, message)


def _upstream_gaps(
    found: tuple[int, str, tuple[str | int, ...]],
    match: Placeholder,
    ids: set[str],
    preds: set[str],
    outputs: Mapping[str, Any],
) -> list[Gap]:
    node_id = found[1]
    parts = match.segments
    if not parts:
        return []
    source, path = parts[0], parts[1:]
    if source not in ids:
        message = (
            f"{match.text} names node '{source}', which this definition does not have (node '{node_id}')"
        )
        return [Gap(*found, UPSTREAM_UNKNOWN_NODE, match.text, source, message)]
    if source not in preds:
        message = (
            f"{match.text}: node '{source}' is not upstream of node '{node_id}' (a node is given only the "
            f"outputs of nodes with an edge into it); add an edge {source} -> {node_id} or fix the placeholder"
        )
        return [Gap(*found, UPSTREAM_NOT_PREDECESSOR, match.text, source, message)]
    missing = missing_path(outputs[source], path) if source in outputs else None
    if missing is None:
        return []
    message = (
        f"{match.text}: the latest output of node '{source}' has no `{missing}` "
        f"(node '{node_id}' would fail on it); pick a field that output has"
    )
    return [Gap(*found, UPSTREAM_MISSING_FIELD, match.text, missing, message)]


def missing_path(value: Any, path: Sequence[str]) -> str | None:
    """The dotted prefix of `path` that `value` lacks, following objects only; None: not missing."""
    for depth, name in enumerate(path):
        if not isinstance(value, Mapping):
            return None
        if name not in value:
            return ".".join(path[: depth + 1])
        value = value[name]
    return None
