"""Differences between two outputs: a structured JSON diff, and a word diff for text.

Pure: standard library only. Used to compare two runs node by node (workflows/forks/comparison.py).

`diff_json` walks both values together (iteratively: a deeply nested output cannot exhaust
the recursion limit) and lists each leaf that differs as a `Change` at a JSON path (`$`,
`$.a.b`, `$.items[2]`, `$["odd key"]`): `added` (only in the second), `removed` (only in the first) or
`changed`. Objects are compared key by key, arrays index by index (an element inserted at
the front shows as every later index changed: outputs are compared as they are, not
aligned). Values are compared as JSON: `1` and `true` differ, `1` and `1.0` do not. At most
`limit` changes are listed; `truncated` says more were found.

`diff_text` splits two texts into words and whitespace and returns the segments of a
minimal edit as (`equal` | `insert` | `delete`, text) pairs, for a side-by-side of LLM text.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from typing import Any

MAX_CHANGES = 200
WORDS = re.compile(r"(\s+)")
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Change:
    """One leaf that differs: its JSON path, how, and the value on each side (None if absent)."""

    path: str
    kind: str  # added | removed | changed
    before: Any = None
    after: Any = None

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind, "before": self.before, "after": self.after}


@dataclass(frozen=True)
class JsonDiff:
    changes: tuple[Change, ...]
    truncated: bool = False

    @property
    def is_same(self) -> bool:
        return not self.changes


def is_same_json(a: Any, b: Any) -> bool:
    """Equal as JSON values: a bool is never equal to a number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b) and (
        type(a) is type(b) or (isinstance(a, int | float) and isinstance(b, int | float))
    )


def diff_json(before: Any, after: Any, limit: int = MAX_CHANGES) -> JsonDiff:
    """The leaves that differ between two JSON values, in document order, at most `limit`."""
    changes: list[Change] = []
    stack: list[tuple[str, Any, Any]] = [("$", before, after)]
    while stack:
        path, a, b = stack.pop()
        if isinstance(a, dict) and isinstance(b, dict):
            keys = list(a) + [k for k in b if k not in a]
            stack.extend(reversed([(member(path, k), a.get(k, MISSING), b.get(k, MISSING)) for k in keys]))
        elif isinstance(a, list) and isinstance(b, list):
            size = max(len(a), len(b))
            pairs = [(f"{path}[{i}]", at(a, i), at(b, i)) for i in range(size)]
            stack.extend(reversed(pairs))
        elif a is MISSING:
            changes.append(Change(path, "added", None, b))
        elif b is MISSING:
            changes.append(Change(path, "removed", a, None))
        elif not is_same_json(a, b):
            changes.append(Change(path, "changed", a, b))
        if len(changes) > limit:
            return JsonDiff(tuple(changes[:limit]), truncated=True)
    return JsonDiff(tuple(changes))


def member(path: str, key: str) -> str:
    """The path of an object's member: `.name`, or `["odd key"]` for a key that is no identifier."""
    return f"{path}.{key}" if IDENTIFIER.match(key) else f"{path}[{json.dumps(key)}]"


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


def at(values: list[Any], index: int) -> Any:
    return values[index] if index < len(values) else MISSING


def diff_text(before: str, after: str) -> list[tuple[str, str]]:
    """The word-level edit from `before` to `after` as (equal | insert | delete, text) segments."""
    a, b = WORDS.split(before), WORDS.split(after)
    segments: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            segments.append(("equal", "".join(a[i1:i2])))
            continue
        if i2 > i1:
            segments.append(("delete", "".join(a[i1:i2])))
        if j2 > j1:
            segments.append(("insert", "".join(b[j1:j2])))
    return segments
