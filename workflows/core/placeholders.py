"""The placeholder syntax of node-config templates: `{root.path.to.value}`, in one place.

Pure (standard library only). A placeholder is a root followed by dotted segments (object
keys and list indexes; nothing else is evaluated): `{input.order_id}`, the run input;
`{upstream.node_id.key}`, a predecessor's output; `{secret.NAME}` (http.request only,
core/secretrefs.py); and, in a map node only, `{item}` / `{item.text}`, the item, and
`{index}`, its 0-based place in the map's list. handlers/builtin.py renders them,
core/contracts.py checks what they need of the input and the upstream outputs, and
core/definition.py refuses an item placeholder outside a map node.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Final, NamedTuple

INPUT, UPSTREAM, SECRET, ITEM, INDEX = "input", "upstream", "secret", "item", "index"
ROOTS: Final = (INPUT, UPSTREAM, SECRET, ITEM, INDEX)
# Roots given only to a map node's items (runtime: NodeContext.item and .index).
ITEM_ROOTS: Final = frozenset({ITEM, INDEX})
PLACEHOLDER: Final = re.compile(r"\{(" + "|".join(ROOTS) + r")((?:\.[A-Za-z0-9_-]+)*)\}")


class Placeholder(NamedTuple):
    """One placeholder found in a string: `{upstream.fetch.user}` is ("upstream", ".fetch.user")."""

    text: str
    root: str
    path: str

    @property
    def segments(self) -> list[str]:
        """The dotted path's segments: ["fetch", "user"]."""
        return self.path.split(".")[1:]


def placeholders_in(text: str, roots: Collection[str] = ROOTS) -> list[Placeholder]:
    """Every placeholder of `text` whose root is one of `roots`, in order."""
    return [Placeholder(m[0], m[1], m[2]) for m in PLACEHOLDER.finditer(text) if m[1] in roots]
