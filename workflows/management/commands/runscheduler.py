from __future__ import annotations

import logging
import signal
import time
from typing import Any

from django.core.management.base import BaseCommand
from django.db import close_old_connections

from workflows.errors import STORES_AWAY
from workflows.runtime.scheduler import Scheduler


class Command(BaseCommand):
    help = "Run a scheduler: consume node completions, start what is ready, reconcile."
    requires_system_checks: list[str] = []  # start fast; `manage.py check` is the place for them

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--name", help="Consumer name (default: host.pid).")

    def handle(self, *args: Any, **options: Any) -> None:
        scheduler = Scheduler(options.get("name"))
        stopping = False

        def request_stop(signum: int, frame: Any) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGINT, request_stop)
        scheduler.start()
        self.stdout.write(f"scheduler {scheduler.name} started", ending="\n")
        self.stdout.flush()
        while not stopping:
            try:
                scheduler.tick()
            except STORES_AWAY as exc:
                # Redis or Postgres away: nothing is lost (Postgres is the truth), try again.
                logging.getLogger(__name__).warning("scheduler waiting for its stores: %s", exc)
                close_old_connections()
                time.sleep(0.5)
        scheduler.stop()
        self.stdout.write(f"scheduler {scheduler.name} stopped")
