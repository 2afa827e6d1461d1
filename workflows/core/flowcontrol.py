"""Flow control by key: the pure parts (key paths, key values, the fair pick).

Pure: standard library only. A node or a whole workflow may declare
`concurrency: {key, limit, default}`; a workflow may declare `debounce: {key, window_s}` and
`singleton: {key, mode}` on its starts. A key is a dotted path written without braces:
`input.customer_id` (the run's input) or, for a node's own concurrency, also
`upstream.<predecessor>.<field>` (a direct predecessor's output).

Decided here:
- a key that does not resolve for a run (the field is absent, or is an object or a list)
  takes the declared `default`, or the empty key `""` when none is declared: such runs share
  one bucket of `limit`; nothing fails and nothing runs unlimited;
- a key value is the field's JSON scalar as text (`42`, `true`, `acme`), cut to
  MAX_KEY_CHARS characters;
- runs of different keys are served round-robin (`fair_order`): the first waiting attempt of
  every key, then the second of every key, and so on, each key's own in its given order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar

MAX_KEY_CHARS: Final = 200
WORKFLOW_SCOPE: Final = "*"  # a workflow's own concurrency: its key counts over all its nodes
_PATH = re.compile(r"^(input|upstream)((?:\.[A-Za-z0-9_-]+)+)$")

T = TypeVar("T")


@dataclass(frozen=True)
class Concurrency:
    """At most `limit` attempts queued, running or waiting at once per value of `key`.

    `scope` is the node id whose attempts count, or WORKFLOW_SCOPE for a workflow's.
    """

    key: str
    limit: int
    default: str = ""
    scope: str = WORKFLOW_SCOPE


@dataclass(frozen=True)
class StartKey:
    """A workflow's `debounce` (window_s set) or `singleton` (mode set) on its starts."""

    key: str
    window_s: float = 0.0
    mode: str = ""  # singleton: "skip" or "queue"
    default: str = ""


def check_key_path(
    path: str, predecessors: Iterable[str] | None, declared: set[str] | None = None
) -> str | None:
    """Why a key path cannot resolve, or None when it can.

    `predecessors` are the node's direct predecessors; None where only `input.` may be used
    (a workflow's keys, start keys). `declared` are the run-input fields the input schema
    declares (None: not declared, not checked).
    """
    match = _PATH.fullmatch(path)
    if match is None:
        return f"{path!r} is not a key path: write input.<field> (or upstream.<node>.<field> on a node)"
    if match[1] == "input":
        name = match[2].split(".")[1]
        if declared is not None and name not in declared:
            return f"{path!r} names {name!r}, which the input schema does not declare"
        return None
    if predecessors is None:
        return f"{path!r} names an upstream output; a workflow's key may use only input.<field>"
    parts = match[2].split(".")[1:]
    known = sorted(predecessors)
    if len(parts) < 2:
        return f"{path!r} names no field: write upstream.<node>.<field>"
    if parts[0] not in known:
        return f"{path!r} names {parts[0]!r}, which is not a direct predecessor (those: {', '.join(known) or 'none'})"
    return None


def resolve_key(path: str, run_input: Any, upstream: Mapping[str, Any], default: str = "") -> str:
    """The key value `path` gives for a run: the field's scalar as text, else `default`."""
    root, *parts = path.split(".")
    value: Any = run_input if root == "input" else upstream
    for part in parts:
        if not isinstance(value, Mapping) or part not in value:
            return default
        value = value[part]
    if isinstance(value, Mapping | list) or value is None:
        return default
    text = value if isinstance(value, str) else json.dumps(value)
    return text[:MAX_KEY_CHARS]


def bucket(scope: str, value: str) -> str:
    """The stored key of an attempt: its scope and its key value (node ids hold no ':')."""
    return f"{scope}:{value}"


def split_bucket(stored: str) -> tuple[str, str]:
    """(scope, key value) of a stored key."""
    scope, _, value = stored.partition(":")
    return scope, value


def fair_order(items: Iterable[T], key: Callable[[T], Hashable]) -> list[T]:
    """Interleave items round-robin by key: each key's first, then each key's second, ...

    Keys take turns in the order their first item comes; within a key, items keep their order.
    """
    queues: dict[Hashable, list[T]] = {}
    for item in items:
        queues.setdefault(key(item), []).append(item)
    ordered: list[T] = []
    depth = max((len(q) for q in queues.values()), default=0)
    for turn in range(depth):
        ordered.extend(q[turn] for q in queues.values() if turn < len(q))
    return ordered
