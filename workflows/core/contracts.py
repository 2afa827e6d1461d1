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
author's to keep.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

# The same placeholder grammar as handlers/builtin.py's templates, for the `input` root.
INPUT_PLACEHOLDER = re.compile(r"\{input((?:\.[A-Za-z0-9_-]+)+)\}")


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
        for match in INPUT_PLACEHOLDER.finditer(text):
            name = match[1].split(".")[1]
            if name not in declared:
                found.append(Unprovided(where, name, match[0]))
    return found


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
