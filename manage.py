#!/usr/bin/env python
"""Django's command-line utility for Switchyard."""

import os
import sys
from pathlib import Path

# Where `make run` writes its embedded servers' URLs (scripts/services.py).
DEV_SERVICES_ENV = Path(__file__).resolve().parent / ".data" / "dev" / "services.env"
# The key `make run` generated for sealing secrets (scripts/run.py).
DEV_SECRETS_KEY = DEV_SERVICES_ENV.parent / "secrets.key"


def use_dev_services() -> None:
    """With neither DATABASE_URL nor REDIS_URL set, talk to the servers `make run` started,
    with the secrets key it generated."""
    if os.environ.get("DATABASE_URL") or os.environ.get("REDIS_URL") or not DEV_SERVICES_ENV.exists():
        return
    for line in DEV_SERVICES_ENV.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and key in ("DATABASE_URL", "REDIS_URL"):
            os.environ[key] = value
    if not os.environ.get("SWITCHYARD_SECRETS_KEY") and DEV_SECRETS_KEY.exists():
        os.environ["SWITCHYARD_SECRETS_KEY"] = DEV_SECRETS_KEY.read_text().strip()


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    use_dev_services()
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
