"""Compare two workflow definitions node by node, edge by edge and field by field.

Both sides are normalised first (``workflows.core.definition.normalise``), so a default spelled out
on one side and left implicit on the other is not a change. Nodes are matched by id and
edges by (source, target); reordering either list is not a change. Node fields are
flattened with dots (``retry.max_attempts``, ``config.headers.accept``); lists are compared
whole. A key present on one side only shows ``None`` on the other, and values are compared
as JSON, so ``1`` and ``true`` differ. The top-level ``description`` is not part of the
diff: it does not change how a graph runs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from workflows.core.definition import canonical_json, normalise


@dataclass(frozen=True)
class FieldChange:
    """Record one field's old and new value; ``field`` is a dotted path."""

    field: str
    old: object
    new: object


@dataclass(frozen=True)
class NodeChange:
    """Record the changed fields of a node present on both sides."""

    node_id: str
    changes: tuple[FieldChange, ...]


@dataclass(frozen=True)
class EdgeChange:
    """Record the changed fields of an edge present on both sides."""

    source: str
    target: str
    changes: tuple[FieldChange, ...]


@dataclass(frozen=True)
class GraphDiff:
    """Hold the structural difference between two definitions, old to new."""

    nodes_added: tuple[str, ...] = ()
    nodes_removed: tuple[str, ...] = ()
    nodes_changed: tuple[NodeChange, ...] = ()
    edges_added: tuple[tuple[str, str], ...] = ()
    edges_removed: tuple[tuple[str, str], ...] = ()
    edges_changed: tuple[EdgeChange, ...] = ()

    def is_empty(self) -> bool:
        """Tell whether the two definitions are structurally the same."""
        return self == GraphDiff()

    def as_dict(self) -> dict[str, Any]:
        """Return the diff as JSON-ready data; edges are {"source", "target"} objects."""
        return {
            "nodes_added": list(self.nodes_added),
            "nodes_removed": list(self.nodes_removed),
            "nodes_changed": [
                {"node_id": c.node_id, "changes": _changes_as_list(c.changes)} for c in self.nodes_changed
            ],
            "edges_added": [_edge_as_dict(edge) for edge in self.edges_added],
            "edges_removed": [_edge_as_dict(edge) for edge in self.edges_removed],
            "edges_changed": [
                {**_edge_as_dict((c.source, c.target)), "changes": _changes_as_list(c.changes)}
                for c in self.edges_changed
            ],
        }


def diff_definitions(old: Mapping[str, Any], new: Mapping[str, Any]) -> GraphDiff:
    """Return what changed from ``old`` to ``new``; raise DefinitionError on a schema error."""
    old_definition, new_definition = normalise(old), normalise(new)
    old_nodes, new_nodes = _nodes_by_id(old_definition), _nodes_by_id(new_definition)
    old_edges, new_edges = _edges_by_pair(old_definition), _edges_by_pair(new_definition)
    return GraphDiff(
        nodes_added=tuple(key for key in new_nodes if key not in old_nodes),
        nodes_removed=tuple(key for key in old_nodes if key not in new_nodes),
        nodes_changed=tuple(
            NodeChange(key, changes) for key, changes in _changed_items(old_nodes, new_nodes)
        ),
        edges_added=tuple(key for key in new_edges if key not in old_edges),
        edges_removed=tuple(key for key in old_edges if key not in new_edges),
        edges_changed=tuple(
            EdgeChange(key[0], key[1], changes) for key, changes in _changed_items(old_edges, new_edges)
        ),
    )


def diff_values(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[FieldChange, ...]:
    """Compare two JSON objects (a run input and its edit) field by field, dotted paths."""
    return _field_changes(old, new)


def _nodes_by_id(definition: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Index nodes by id, dropping the id itself; the first of duplicate ids wins."""
    nodes: dict[str, dict[str, Any]] = {}
    for node in definition["nodes"]:
        nodes.setdefault(node["id"], {k: v for k, v in node.items() if k != "id"})
    return nodes


def _edges_by_pair(definition: Mapping[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """Index edges by (source, target), keeping only their other fields."""
    edges: dict[tuple[str, str], dict[str, Any]] = {}
    for edge in definition["edges"]:
        fields = {k: v for k, v in edge.items() if k not in ("source", "target")}
        edges.setdefault((edge["source"], edge["target"]), fields)
    return edges


def _changed_items(
    old: Mapping[Any, Mapping[str, Any]], new: Mapping[Any, Mapping[str, Any]]
) -> Iterator[tuple[Any, tuple[FieldChange, ...]]]:
    """Yield the keys present on both sides whose fields differ, in new order."""
    for key, new_fields in new.items():
        if key in old:
            changes = _field_changes(old[key], new_fields)
            if changes:
                yield key, changes


def _field_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[FieldChange, ...]:
    """Compare two objects field by field after flattening nested objects."""
    flat_old, flat_new = dict(_flatten(old)), dict(_flatten(new))
    paths = sorted(flat_old.keys() | flat_new.keys())
    return tuple(
        FieldChange(path, flat_old.get(path), flat_new.get(path))
        for path in paths
        if not _same(flat_old, flat_new, path) and not _is_emptied(flat_old, flat_new, path)
    )


def _same(old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> bool:
    """Tell whether a path holds the same JSON value on both sides (absent counts)."""
    if (path in old) != (path in new):
        return False
    return canonical_json(old[path]) == canonical_json(new[path]) if path in old else True


def _is_emptied(old: Mapping[str, Any], new: Mapping[str, Any], path: str) -> bool:
    """Tell whether a path is an empty object on one side and has nested fields on the other.

    Such a change is already told by its nested fields ("config.a.b" removed), so the
    object itself ("config.a" became {}) is not reported again.
    """
    empty_side, other_side = (old, new) if old.get(path) == {} else (new, old)
    prefix = f"{path}."
    return empty_side.get(path) == {} and any(key.startswith(prefix) for key in other_side)


def _flatten(value: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """Yield (dotted path, leaf) pairs; empty objects and lists are leaves.

    Iterative, so a deeply nested config cannot exhaust the recursion limit.
    """
    # reversed() needs the items view of a dict (JSON objects are): typeshed gives Mapping's none.
    stack: list[tuple[str, Any]] = [(str(key), item) for key, item in reversed(value.items())]  # type: ignore[call-overload]  # see the comment above
    while stack:
        path, item = stack.pop()
        if isinstance(item, Mapping) and item:
            stack.extend((f"{path}.{key}", child) for key, child in reversed(item.items()))  # type: ignore[call-overload]  # see the comment above
        else:
            yield path, item


def _changes_as_list(changes: tuple[FieldChange, ...]) -> list[dict[str, object]]:
    """Turn field changes into JSON-ready dicts."""
    return [{"field": c.field, "old": c.old, "new": c.new} for c in changes]


def _edge_as_dict(edge: tuple[str, str]) -> dict[str, str]:
    """Turn an edge key into a JSON-ready dict."""
    return {"source": edge[0], "target": edge[1]}
