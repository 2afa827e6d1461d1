from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from workflows.operations import backup
from workflows.store.errors import DomainError


class Command(BaseCommand):
    help = (
        "Back up the store (PostgreSQL) with pg_dump into one file, safe while everything runs. "
        "Redis is not backed up: it holds nothing PostgreSQL cannot rebuild."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "file", nargs="?", help="Where to write the backup (default: switchyard-<UTC time>.dump here)."
        )
        parser.add_argument(
            "--pg-bin", type=Path, help="The folder of pg_dump (default: the embedded wheel's, else PATH)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
        path = Path(options["file"] or f"switchyard-{stamp}.dump")
        try:
            written = backup.backup(path, options["pg_bin"])
        except DomainError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"backup written to {written} ({written.stat().st_size} bytes)")
