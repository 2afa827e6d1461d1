"""Topic names, and what a subscription makes of an event: whether it starts a run, with what input.

Pure. A subscription's `filter` and the values of its `input_mapping` are written in the
language of edge conditions (`core/conditions.py`), in which `input` is the event (its
CloudEvents attributes, extensions and `data`) and `output` is the event's data: a filter
`output.total > 100 and input.source == "/shop"` admits the big orders of one shop, and a
mapping `{"order_id": "output.id", "kind": "input.type"}` makes the run input
`{"order_id": ..., "kind": ...}` (a missing value is null). Without a mapping the run input is
the event's data when it is a JSON object, else `{"data": <data>}`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from workflows.core.conditions import ConditionError, parse_condition

TOPIC_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,199}$"
TOPIC_RE: Final = re.compile(TOPIC_PATTERN)
MAX_MAPPING_KEYS: Final = 100


def topic_problem(name: str) -> str | None:
    """What is wrong with a topic name (None: nothing)."""
    if TOPIC_RE.match(name):
        return None
    return (
        f"topic: {name!r} is not a topic name: a letter or digit, then up to 199 letters, digits "
        "or . _ : / - (e.g. orders.created)."
    )


def filter_problem(source: str) -> str | None:
    if not source.strip():
        return None
    try:
        parse_condition(source)
    except ConditionError as exc:
        return f"filter: {exc}"
    return None


def mapping_problems(mapping: Any) -> list[tuple[str, str]]:
    """(field, message) for each bad part of an input mapping (None: no mapping, fine)."""
    if mapping is None:
        return []
    if not isinstance(mapping, Mapping):
        return [("input_mapping", "an object of run input keys to expressions over the event.")]
    if len(mapping) > MAX_MAPPING_KEYS:
        return [("input_mapping", f"at most {MAX_MAPPING_KEYS} keys.")]
    problems = []
    for key, expression in mapping.items():
        if not isinstance(expression, str):
            problems.append((f"input_mapping.{key}", "an expression, as text (e.g. output.order_id)."))
            continue
        try:
            parse_condition(expression)
        except ConditionError as exc:
            problems.append((f"input_mapping.{key}", str(exc)))
    return problems


def admits(filter_source: str, event: Mapping[str, Any]) -> bool:
    """Whether a subscription's filter admits the event (no filter: every event)."""
    if not filter_source.strip():
        return True
    return parse_condition(filter_source).evaluate(event.get("data"), event)


def run_input(mapping: Mapping[str, str] | None, event: Mapping[str, Any]) -> Any:
    """The run input a subscription makes of an event."""
    data = event.get("data")
    if mapping is None:
        return data if isinstance(data, dict) else {"data": data}
    return {key: parse_condition(expr).value(data, event) for key, expr in mapping.items()}
