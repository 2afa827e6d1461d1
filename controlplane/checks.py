"""System checks for deployment settings."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, register


@register("security", deploy=False)
def refuse_default_secret_key(app_configs: Any, **kwargs: Any) -> list[Error]:
    """Refuse to run with the development secret key when DEBUG is off, outside local use."""
    local = {"localhost", "127.0.0.1", "[::1]"}
    if (
        settings.SECRET_KEY == settings.DEV_SECRET_KEY
        and not settings.DEBUG
        and set(settings.ALLOWED_HOSTS) - local
    ):
        return [
            Error(
                "SECRET_KEY is the development default.",
                hint="Set SECRET_KEY in the environment.",
                id="sy.E001",
            )
        ]
    return []
