"""Map nodes: a handler run once per item of a list computed from the data.

Pure: standard library and the condition language. A node with `map` (an expression in the
edge conditions' language over `input`, the run input, and `output`: the sole
predecessor's output, else its predecessors' outputs by node id) is of kind `map`. Its
handler runs once per item, given the item and its index (`ctx.item`, `ctx.index`), at most
`max_parallel` items queued or running at once; each item is a durable attempt of its own
with the node's retry policy, timeout and, once out of attempts, a dead letter. The node's
output is the list of the item outputs, in the order of the items. `on_item_failure` says
what a dead item does once every item has finished: `fail` makes the node dead (its run
fails, or goes on along `all_done` edges; each dead item's letter can be replayed, and the
node finishes again), `continue` makes it succeed with the failure marked in its place,
`{"failed": true, "index": i, "error": "..."}`.

Bad input: a list over MAX_ITEMS items, or a value that is not a list, fails the node with a
message naming the expression and what it gave (`items_of`): the list is known only at run
time (an expression is at most 500 characters, so no literal list in it reaches the limit).
An expression that does not parse, a map on a wait node, or map settings without `map`
are refused at validation (`check_map`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from workflows.core.conditions import Condition, ConditionError
from workflows.core.graph import WAIT_KINDS

MAX_ITEMS: Final = 10_000
MAX_PARALLEL: Final = 1_000
DEFAULT_MAX_PARALLEL: Final = 10
FAIL, CONTINUE = "fail", "continue"
ON_ITEM_FAILURE: Final = (FAIL, CONTINUE)

_JSON_TYPES: Final[Mapping[type, str]] = {
    dict: "object",
    str: "string",
    bool: "boolean",
    int: "number",
    float: "number",
    type(None): "null",
}


def check_map(
    handler: str, expression: str | None, max_parallel: int | None, on_item_failure: str | None
) -> list[tuple[str, str]]:
    """Return (field, message) for what the schema cannot say about a node's map fields."""
    if expression is None:
        stray = [
            name for name, v in (("max_parallel", max_parallel), ("on_item_failure", on_item_failure)) if v
        ]
        return [(name, f"{name} applies only to a map node: set map too") for name in stray]
    if handler in WAIT_KINDS:
        return [("map", f"a {handler} node cannot map over items")]
    try:
        Condition(expression)
    except ConditionError as err:
        return [("map", f"is not a valid expression: {err}")]
    return []


def items_of(expression: str, run_input: Any, output: Any) -> tuple[list[Any], str]:
    """The items a map node runs over, or ([], why not): not a list, or over MAX_ITEMS."""
    value = Condition(expression).value(output, run_input)
    if not isinstance(value, list):
        found = "null (or nothing)" if value is None else f"a {json_type(value)}"
        return [], f"map {expression!r} gave {found}, not a list"
    if len(value) > MAX_ITEMS:
        return [], f"map {expression!r} gave {len(value):,} items; a map runs at most {MAX_ITEMS:,}"
    return value, ""


def json_type(value: Any) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def failed_item(index: int, error: str) -> dict[str, Any]:
    """What stands for a dead item in the output of a map that continues past failures."""
    return {"failed": True, "index": index, "error": error}


def map_outcome(policy: str, dead: int) -> str:
    """How a map node whose items have all finished ends: succeeded or dead."""
    return "dead" if dead and policy != CONTINUE else "succeeded"
