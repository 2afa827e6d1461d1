"""The audit trail: one call records who did what to which object."""

from __future__ import annotations

from typing import Any

from workflows.store.models import AuditEntry


def actor_label(actor: Any) -> str:
    """Name a person (username) or anything else that acts (its str)."""
    if actor is None:
        return "system"
    return getattr(actor, "username", None) or str(actor)


def record(actor: Any, action: str, target: Any, **data: Any) -> AuditEntry:
    """Append an audit entry; `actor` is a user, an API key or None (the system)."""
    return record_about(actor, action, type(target)._meta.model_name, str(target.pk), **data)


def record_about(actor: Any, action: str, target_type: str, target_id: str, **data: Any) -> AuditEntry:
    """Append an audit entry about something that is not a row (a worker, say)."""
    user = actor if getattr(actor, "is_authenticated", False) else getattr(actor, "owner", None)
    return AuditEntry.objects.create(
        actor=user,
        actor_label=actor_label(actor),
        action=action,
        target_type=target_type,
        target_id=target_id,
        data=data,
    )
