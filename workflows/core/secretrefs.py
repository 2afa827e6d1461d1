"""Secret references in node configs: `{secret.NAME}`, where they may stand and where they do.

Pure (standard library only). A secret's value never enters a definition: a config names it
as `{secret.NAME}`, and only the worker replaces the name with the value, at call time
(`workflows/handlers/builtin.py`). References are resolved in `http.request`'s `url`,
`headers` and `json` and nowhere else: a reference in any other field (an LLM prompt, say)
would send the value to a place that shows it, so a definition that has one is refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

NAME_PATTERN: Final = r"[A-Za-z_][A-Za-z0-9_]{0,63}"
NAME_RE: Final = re.compile(f"^{NAME_PATTERN}$")
REFERENCE_RE: Final = re.compile(r"\{secret\.(" + NAME_PATTERN + r")\}")
# handler -> the top-level config fields in which references are resolved
RESOLVED_IN: Final[Mapping[str, tuple[str, ...]]] = {"http.request": ("url", "headers", "json")}


@dataclass(frozen=True)
class Reference:
    """One `{secret.NAME}` in a node's config: `path` is the JSON path from the definition."""

    node_id: str
    handler: str
    path: str
    field: str  # the top-level config field
    name: str

    @property
    def is_resolved(self) -> bool:
        """Whether the worker resolves a reference in this place (else the definition is refused)."""
        return self.field in RESOLVED_IN.get(self.handler, ())


def names_in(text: str) -> list[str]:
    """Return the secret names a string references, in order."""
    return REFERENCE_RE.findall(text)


def strings_in(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """Yield (JSON path, string) for every string value in a JSON value (keys are never resolved)."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, list):
        for n, item in enumerate(value):
            yield from strings_in(item, f"{path}[{n}]")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from strings_in(item, f"{path}.{key}")


def references(definition: Any) -> list[Reference]:
    """Return every secret reference in a definition's node configs (a malformed one: none)."""
    nodes = definition.get("nodes") if isinstance(definition, Mapping) else None
    if not isinstance(nodes, list):
        return []
    found = []
    for n, node in enumerate(nodes):
        if not isinstance(node, Mapping) or not isinstance(node.get("config"), Mapping):
            continue
        node_id, handler = str(node.get("id", "")), str(node.get("handler", ""))
        for field, value in node["config"].items():
            for path, text in strings_in(value, f"nodes[{n}].config.{field}"):
                found += [Reference(node_id, handler, path, str(field), name) for name in names_in(text)]
    return found


def names_used(definition: Any) -> set[str]:
    """Return the names of the secrets a definition references."""
    return {ref.name for ref in references(definition)}
