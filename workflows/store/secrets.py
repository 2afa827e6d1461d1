"""The secrets store: values sealed at rest, revealed only in a worker, redacted wherever they go.

A value is sealed with Fernet (AES-128-CBC with HMAC-SHA256, from `cryptography`) under the
keys of SWITCHYARD_SECRETS_KEY (comma-separated; the first seals, all open, as MultiFernet),
so PostgreSQL, its backups and the admin never hold a value in clear. A key is rotated by
putting the new one first, running `manage.py secrets rotate` (every row re-sealed under it)
and then dropping the old one.

`reveal` is called by the handlers that resolve `{secret.NAME}` (runtime layer), at call time
and never elsewhere; each value it returns is remembered in the process for
`redaction.redact` (see there).
"""

from __future__ import annotations

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.db import models

from workflows.store.errors import Invalid
from workflows.store.redaction import remember

MAX_VALUE_BYTES = 64 * 1024


class Secret(models.Model):
    """One named secret; `sealed` is its Fernet token, `revision` counts its changes."""

    name = models.CharField(max_length=64, unique=True)
    sealed = models.TextField()
    description = models.CharField(max_length=200, blank=True)
    revision = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.CharField(max_length=200, blank=True)

    class Meta:
        app_label = "workflows"
        ordering = ["name"]

    def __str__(self) -> str:
        return f"secret {self.name}"


class NoSecretsKey(Invalid):
    """No key is configured: nothing can be sealed or revealed."""


def keys() -> list[str]:
    """The configured keys, newest (the one that seals) first."""
    raw = str(settings.SWITCHYARD.get("SECRETS_KEY", ""))
    return [k.strip() for k in raw.split(",") if k.strip()]


def cipher() -> MultiFernet:
    """The MultiFernet of the configured keys; raise NoSecretsKey (naming the setting) if none."""
    found = keys()
    if not found:
        raise NoSecretsKey(
            "No secrets key is configured: set SWITCHYARD_SECRETS_KEY "
            "(`manage.py secrets genkey` prints a new one)."
        )
    try:
        return MultiFernet([Fernet(k.encode()) for k in found])
    except ValueError:
        raise NoSecretsKey(
            "SWITCHYARD_SECRETS_KEY: each key must be 32 url-safe base64-encoded bytes "
            "(`manage.py secrets genkey` prints one)."
        ) from None


def new_key() -> str:
    return Fernet.generate_key().decode()


def seal(value: str) -> str:
    return cipher().encrypt(value.encode()).decode()


def unseal(token: str, name: str) -> str:
    try:
        return cipher().decrypt(token.encode()).decode()
    except InvalidToken:
        raise Invalid(
            f"secret {name!r} cannot be opened with the configured keys: "
            "put the key it was sealed with back in SWITCHYARD_SECRETS_KEY."
        ) from None


def reveal(name: str) -> str | None:
    """Return a secret's value (None: there is no such secret) and remember it for `redact`.

    For the handlers that resolve references, in the worker, at call time only.
    """
    row = Secret.objects.filter(name=name).values_list("sealed", flat=True).first()
    if row is None:
        return None
    value = unseal(row, name)
    remember(name, value)
    return value
