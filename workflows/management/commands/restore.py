from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from workflows.operations import backup
from workflows.store.errors import DomainError


class Command(BaseCommand):
    help = (
        "Restore a `manage.py backup` file into the database of DATABASE_URL (empty, or --replace), "
        "then empty REDIS_URL's database. Stop every Switchyard process first; start them after: "
        "the schedulers' reconciler finishes the runs that were in flight at the backup."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("file", type=Path, help="The backup file.")
        parser.add_argument(
            "--replace", action="store_true", help="Drop Switchyard's tables in a database that has them."
        )
        parser.add_argument(
            "--keep-redis",
            action="store_true",
            help="Do not empty REDIS_URL's database (only when it is already empty, or not Switchyard's).",
        )
        parser.add_argument(
            "--pg-bin", type=Path, help="The folder of pg_restore (default: the embedded wheel's, else PATH)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            backup.restore(options["file"], options["replace"], not options["keep_redis"], options["pg_bin"])
        except DomainError as exc:
            raise CommandError(str(exc)) from None
        redis = "kept" if options["keep_redis"] else "emptied"
        self.stdout.write(f"restored {options['file']}; Redis {redis}. Start the schedulers and workers.")
