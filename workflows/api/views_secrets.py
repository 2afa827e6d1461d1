"""Secrets, for admins: list, set (write-only: no answer ever holds a value), read, delete.

The bodies and answers are declared here, beside their only views. A value goes in through
`PUT /secrets/{name}` and never comes back out: the answers carry the name, the revision,
who changed it when, and which workflows reference it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from ninja import Path, Router, Status
from pydantic import Field
from typing_extensions import TypedDict

from workflows.api.auth import ApiRequest, allowed
from workflows.api.inputs import Body
from workflows.api.schema import refuses
from workflows.core.secretrefs import NAME_PATTERN
from workflows.secrets import catalog
from workflows.secrets.usage import Use, workflows_using
from workflows.store.secrets import Secret

router = Router(tags=["secrets"])
Name = Annotated[
    str, Path(pattern=f"^{NAME_PATTERN}$", description="The secret's name, as in {secret.NAME}.")
]


class SecretIn(Body):
    value: str = Field(min_length=1, description="The value; sealed at once, never shown again.")
    description: str | None = Field(None, max_length=200)


class UseOut(TypedDict):
    workflow: str
    versions: list[int]
    active: bool


class SecretOut(TypedDict):
    name: str
    description: str
    revision: int
    created_at: datetime
    updated_at: datetime
    updated_by: str
    used_by: list[UseOut]


class SecretChangeOut(TypedDict):
    action: str
    actor: str
    at: datetime
    revision: int | None


class SecretDetailOut(SecretOut):
    changes: list[SecretChangeOut]


def use_out(use: Use) -> UseOut:
    return {"workflow": use.slug, "versions": list(use.versions), "active": use.active}


def secret_out(row: Secret, used_by: list[Use]) -> SecretOut:
    return {
        "name": row.name,
        "description": row.description,
        "revision": row.revision,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
        "updated_by": row.updated_by,
        "used_by": [use_out(u) for u in used_by],
    }


@router.get("/secrets", response=list[SecretOut], auth=allowed("manage_secrets"), summary="List secrets")
def list_secrets(request: ApiRequest) -> Any:
    """List the secrets by name (never their values), with the workflows that reference each."""
    return [secret_out(row, workflows_using(row.name)) for row in Secret.objects.all()]


@router.put(
    "/secrets/{name}", response={200: SecretOut}, auth=allowed("manage_secrets"), summary="Set a secret"
)
def set_secret(request: ApiRequest, name: Name, body: SecretIn) -> Any:
    """Create the secret or replace its value (write-only: the answer never holds it)."""
    row = catalog.set_secret(name, body.value, actor=request.auth, description=body.description)
    return Status(200, secret_out(row, workflows_using(name)))


@router.get(
    "/secrets/{name}", response=SecretDetailOut, auth=allowed("manage_secrets"), summary="Read a secret"
)
@refuses(404)
def read_secret(request: ApiRequest, name: Name) -> Any:
    """Read a secret's metadata, its changes (audit) and the workflows that reference it; not its value."""
    found = catalog.details(name)
    changes: list[SecretChangeOut] = [
        {"action": e.action, "actor": e.actor_label, "at": e.at, "revision": e.data.get("revision")}
        for e in found.changes
    ]
    return {**secret_out(found.secret, found.used_by), "changes": changes}


@router.delete(
    "/secrets/{name}", response={204: None}, auth=allowed("manage_secrets"), summary="Delete a secret"
)
@refuses(404)
def delete_secret(request: ApiRequest, name: Name) -> Any:
    """Delete a secret; nodes that reference it fail at call time, naming it."""
    catalog.delete_secret(name, actor=request.auth)
    return Status(204, None)
