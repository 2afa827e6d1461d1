"""`manage.py secrets genkey | list | set NAME | delete NAME | rotate`.

`set` reads the value from standard input (never from the command line, which `ps` and the
shell's history would show). `rotate` re-seals every secret under the first key of
SWITCHYARD_SECRETS_KEY: put a new key first (`genkey`), keep the old ones after it, rotate,
then drop the old ones.
"""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from workflows.secrets import catalog
from workflows.secrets.usage import workflows_using
from workflows.store.errors import DomainError
from workflows.store.secrets import Secret, new_key


class Command(BaseCommand):
    help = "Manage secrets: generate a key, list, set (value on stdin), delete, rotate the key."

    def add_arguments(self, parser: Any) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("genkey", help="Print a new key for SWITCHYARD_SECRETS_KEY.")
        sub.add_parser("list", help="List the secrets (names, revisions, users; never values).")
        put = sub.add_parser("set", help="Set a secret; its value is read from standard input.")
        put.add_argument("name")
        delete = sub.add_parser("delete", help="Delete a secret.")
        delete.add_argument("name")
        sub.add_parser("rotate", help="Re-seal every secret under the first key of SWITCHYARD_SECRETS_KEY.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            getattr(self, f"do_{options['action']}")(options)
        except DomainError as exc:
            raise CommandError(exc.message) from None

    def do_genkey(self, options: dict[str, Any]) -> None:
        self.stdout.write(new_key())

    def do_list(self, options: dict[str, Any]) -> None:
        for row in Secret.objects.all():
            used = ", ".join(u.slug for u in workflows_using(row.name)) or "-"
            self.stdout.write(f"{row.name}\trevision {row.revision}\t{row.updated_at:%Y-%m-%d %H:%M}\t{used}")

    def do_set(self, options: dict[str, Any]) -> None:
        value = sys.stdin.read().rstrip("\n")
        row = catalog.set_secret(options["name"], value, actor="manage.py secrets")
        self.stdout.write(f"secret {row.name}: revision {row.revision}")

    def do_delete(self, options: dict[str, Any]) -> None:
        catalog.delete_secret(options["name"], actor="manage.py secrets")
        self.stdout.write(f"secret {options['name']} deleted")

    def do_rotate(self, options: dict[str, Any]) -> None:
        count = catalog.rotate(actor="manage.py secrets")
        self.stdout.write(f"{count} secrets re-sealed under the first key")
