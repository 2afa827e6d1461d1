"""API keys, for admins: list, create (the key is in this answer only), read, revoke."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.http import HttpResponse

from workflows import keys
from workflows.api import serializers as s
from workflows.api.pagination import paginate
from workflows.api.routing import Call, render
from workflows.errors import Invalid
from workflows.models import ApiKey


def list_keys(call: Call) -> HttpResponse:
    """List API keys, newest first (never their secrets)."""
    return render(paginate(ApiKey.objects.select_related("owner"), call.query, "id", s.api_key))


def create_key(call: Call) -> HttpResponse:
    """Create an API key; the `key` field of this answer is the only time it is shown."""
    b = call.body
    owner = call.key.owner if b.owner is None else find_user(b.owner)
    key, plaintext = keys.create_key(owner, b.name, b.scopes, b.expires_at, actor=call.key)
    return render({**s.api_key(key), "key": plaintext}, 201, {"Location": f"/api/v1/keys/{key.pk}"})


def find_user(username: str) -> object:
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise Invalid(f"owner: there is no user named {username!r}.")
    return user


def read_key(call: Call, key_id: int) -> HttpResponse:
    """Read an API key's metadata: scopes, owner, expiry, revocation, last use."""
    return render(s.api_key(keys.get_key(key_id)))


def revoke_key(call: Call, key_id: int) -> HttpResponse:
    """Revoke an API key; it is refused from the next request on. The record stays."""
    return render(s.api_key(keys.revoke_key(key_id, actor=call.key)))
