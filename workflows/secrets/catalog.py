"""Secrets for admins: set (create or replace), delete, list, read one's history, rotate the key.

Write-only: `set_secret` takes a value and seals it; nothing here returns one. Each change is
an audit entry about `secret:NAME` (action `secret.set` with the revision, or
`secret.deleted`), never with the value, so a secret's page can show who changed it when.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cryptography.fernet import InvalidToken
from django.db import transaction

from workflows.core.secretrefs import NAME_RE
from workflows.secrets.usage import Use, workflows_using
from workflows.store import audit
from workflows.store.errors import Invalid, NotFound
from workflows.store.models import AuditEntry
from workflows.store.secrets import MAX_VALUE_BYTES, Secret, cipher, seal

TARGET = "secret"


def check_name(name: str) -> None:
    if not NAME_RE.match(name):
        raise Invalid(
            "name: a secret's name is a letter or _ then up to 63 letters, digits or _ "
            f"(it is written {{secret.NAME}} in a config), not {name!r}."
        )


def check_value(value: str) -> None:
    if not value:
        raise Invalid("value: give the secret's value (it cannot be empty).")
    if len(value.encode()) > MAX_VALUE_BYTES:
        raise Invalid(f"value: at most {MAX_VALUE_BYTES // 1024} KiB.")


def set_secret(name: str, value: str, actor: Any = None, description: str | None = None) -> Secret:
    """Create the secret `name` or replace its value; return the row (it holds no clear value)."""
    check_name(name)
    check_value(value)
    sealed = seal(value)
    with transaction.atomic():
        row = Secret.objects.select_for_update().filter(name=name).first()
        if row is None:
            row = Secret(name=name, revision=1)
        else:
            row.revision += 1
        row.sealed = sealed
        if description is not None:
            row.description = description[:200]
        row.updated_by = audit.actor_label(actor)
        row.save()
        audit.record_about(actor, "secret.set", TARGET, name, revision=row.revision)
    return row


def get_secret(name: str) -> Secret:
    row = Secret.objects.filter(name=name).first()
    if row is None:
        raise NotFound(f"There is no secret {name!r}.")
    return row


def delete_secret(name: str, actor: Any = None) -> None:
    """Delete a secret; nodes referencing it fail at call time (and their definitions on save)."""
    with transaction.atomic():
        deleted, _ = Secret.objects.filter(name=name).delete()
        if not deleted:
            raise NotFound(f"There is no secret {name!r}.")
        audit.record_about(actor, "secret.deleted", TARGET, name)


def history(name: str, limit: int = 50) -> list[AuditEntry]:
    """The audit entries about a secret, newest first (kept after it is deleted)."""
    return list(AuditEntry.objects.filter(target_type=TARGET, target_id=name)[:limit])


@dataclass(frozen=True)
class Details:
    secret: Secret
    used_by: list[Use]
    changes: list[AuditEntry]


def details(name: str) -> Details:
    return Details(get_secret(name), workflows_using(name), history(name))


def rotate(actor: Any = None) -> int:
    """Re-seal every secret under the first configured key; return how many were re-sealed.

    Put the new key first in SWITCHYARD_SECRETS_KEY (the old ones after it), run this, then
    drop the old keys: rows sealed under any configured key are opened and sealed anew.
    """
    fernet = cipher()
    count = 0
    with transaction.atomic():
        for row in Secret.objects.select_for_update().order_by("id"):
            try:
                sealed = fernet.rotate(row.sealed.encode()).decode()
            except InvalidToken:
                raise Invalid(
                    f"secret {row.name!r} cannot be opened with the configured keys: keep the key "
                    "it was sealed with in SWITCHYARD_SECRETS_KEY (after the new one) while rotating."
                ) from None
            Secret.objects.filter(id=row.id).update(sealed=sealed)
            count += 1
        audit.record_about(actor, "secret.rotated", TARGET, "*", count=count)
    return count
