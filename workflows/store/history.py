"""The run's history: events appended as RunEvent rows (the trace and the audit of a run read them)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from workflows.store.models import RunEvent


def event(kind: str, run_id: int, node_id: str = "", attempt: int = 0, data: Any = None) -> RunEvent:
    return RunEvent(
        run_id=run_id, kind=kind, node_id=node_id, attempt=attempt, at=timezone.now(), data=data or {}
    )


def record_events(*events: RunEvent) -> None:
    RunEvent.objects.bulk_create(events)
