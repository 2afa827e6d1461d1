"""API keys, for admins: list, create (the key is in this answer only), read, revoke."""

from __future__ import annotations

from typing import Annotated, Any

from django.contrib.auth import get_user_model
from django.http import HttpRequest, HttpResponse
from ninja import Path, Query, Router, Status

from workflows.api import inputs as i, serializers as s
from workflows.api.auth import ApiRequest, allowed, person_of
from workflows.api.pagination import paginate
from workflows.api.parsing import MAX_ID
from workflows.api.schema import refuses
from workflows.integrations import keys
from workflows.store.errors import Invalid
from workflows.store.models import ApiKey

router = Router(tags=["api keys"])
KeyId = Annotated[int, Path(ge=1, le=MAX_ID)]


@router.get("/keys", response=s.KeyPage, auth=allowed("manage_keys"), summary="List API keys")
def list_keys(request: HttpRequest, q: Query[i.Page]) -> Any:
    """List API keys, newest first (never their secrets)."""
    return paginate(ApiKey.objects.select_related("owner"), q, "id", s.api_key)


@router.post("/keys", response={201: s.KeyCreated}, auth=allowed("manage_keys"), summary="Create an API key")
def create_key(request: ApiRequest, response: HttpResponse, body: i.KeyCreate) -> Any:
    """Create an API key; the `key` field of this answer is the only time it is shown."""
    owner = person_of(request.auth) if body.owner is None else find_user(body.owner)
    key, plaintext = keys.create_key(owner, body.name, body.scopes, body.expires_at, actor=request.auth)
    response["Location"] = f"/api/v1/keys/{key.pk}"
    return Status(201, {**s.api_key(key), "key": plaintext})


def find_user(username: str) -> object:
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise Invalid(f"owner: there is no user named {username!r}.")
    return user


@router.get("/keys/{id:key_id}", response=s.KeyOut, auth=allowed("manage_keys"), summary="Read an API key")
@refuses(404)
def read_key(request: HttpRequest, key_id: KeyId) -> Any:
    """Read an API key's metadata: scopes, owner, expiry, revocation, last use."""
    return s.api_key(keys.get_key(key_id))


@router.delete(
    "/keys/{id:key_id}", response=s.KeyOut, auth=allowed("manage_keys"), summary="Revoke an API key"
)
@refuses(404, 409)
def revoke_key(request: ApiRequest, key_id: KeyId) -> Any:
    """Revoke an API key; it is refused from the next request on. The record stays."""
    return s.api_key(keys.revoke_key(key_id, actor=request.auth))
