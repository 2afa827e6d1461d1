"""The edits a node's input went through: replays of its dead letters with edited input.

A replay with edited input (runs/actions.py `replay_dead_letter`) records who and when in
the run's history (`node.replayed` with `edited_input`); the original is what the node was
given when it died, kept in its dead letter's input snapshot. The run page shows each edit
with a field-by-field diff against that original (core/diff.py `diff_values`), newest first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from workflows.core.diff import FieldChange, diff_values
from workflows.store.models import DeadLetter, RunEvent


@dataclass(frozen=True)
class InputEdit:
    """One replay with edited input: who, when, which letter, the input before and after."""

    by: str
    at: datetime
    letter_id: int | None
    attempt: int  # the node's attempt that died; the edited input ran from the next one
    original: Any
    edited: Any
    changes: tuple[FieldChange, ...]
    item: bool  # a map item's input (the item), not the node's run input


def input_edits(run_id: int, node_id: str) -> list[InputEdit]:
    """The node's replays with edited input, newest first (two queries)."""
    events = list(
        RunEvent.objects.filter(
            run_id=run_id, node_id=node_id, kind="node.replayed", data__has_key="edited_input"
        )
        .order_by("-id")
        .values("at", "attempt", "data")
    )
    if not events:
        return []
    letter_ids = [e["data"].get("letter") for e in events]
    letters = DeadLetter.objects.filter(pk__in=[i for i in letter_ids if isinstance(i, int)])
    snapshots = {
        pk: (snap, item) for pk, snap, item in letters.values_list("pk", "input_snapshot", "map_item_id")
    }
    return [edit_of(e, snapshots) for e in events]


def edit_of(event: Mapping[str, Any], snapshots: Mapping[int, tuple[Any, int | None]]) -> InputEdit:
    data = event["data"]
    letter = data.get("letter") if isinstance(data.get("letter"), int) else None
    snapshot, item = snapshots.get(letter, ({}, None)) if letter is not None else ({}, None)
    original = (snapshot or {}).get("item" if item else "input")
    edited = data["edited_input"]
    if isinstance(original, dict) and isinstance(edited, dict):
        changes = diff_values(original, edited)
    else:
        changes = (FieldChange("", original, edited),)
    return InputEdit(
        by=str(data.get("by") or "someone"),
        at=event["at"],
        letter_id=letter,
        attempt=event["attempt"],
        original=original,
        edited=edited,
        changes=changes,
        item=item is not None,
    )
