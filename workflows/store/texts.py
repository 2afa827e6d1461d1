"""What a person may send that PostgreSQL can store: text without NUL characters or unpaired
surrogates, and JSON that is JSON to anyone (no NaN, no numbers beyond a float, not nested
past Python's recursion limit).

The one check for every surface: the API's parser (api/parsing.py), the pages' middleware
(controlplane/textguard.py) and the editor's JSON bodies. PostgreSQL refuses NUL in text and
in jsonb (`DataError`), psycopg cannot encode a lone surrogate: unchecked, each was a 500.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

Loc = tuple[str | int, ...]


def is_text(value: str) -> bool:
    if "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def first_bad_text(data: Any) -> Loc | None:
    """Return the location of the first key or string PostgreSQL cannot store, else None."""
    stack: list[tuple[Loc, Any]] = [((), data)]
    while stack:
        loc, value = stack.pop()
        if isinstance(value, str) and not is_text(value):
            return loc
        if isinstance(value, dict):
            for key, item in value.items():
                if not is_text(key):
                    return loc
                stack.append(((*loc, key), item))
        elif isinstance(value, list):
            stack.extend(((*loc, index), item) for index, item in enumerate(value))
    return None


def loc_path(loc: Sequence[str | int]) -> str:
    """Join a location as a JSON path: ("nodes", 2, "id") -> "nodes[2].id"."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", part):
            path += f".{part}" if path else part
        else:
            path += f"[{json.dumps(part, ensure_ascii=False)}]"
    return path


def parse_json(raw: str | bytes) -> Any:
    """Parse JSON strictly; raise ValueError saying what is wrong (nesting included)."""
    try:
        return json.loads(raw, parse_constant=refuse_constant, parse_float=finite_float)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is too large")
    return value
