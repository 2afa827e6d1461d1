from __future__ import annotations

import logging
import signal
import time
from typing import Any

from django.core.management.base import BaseCommand
from django.db import close_old_connections

from workflows.runtime.outages import STORES_AWAY, Outage
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
        outage = Outage(f"scheduler {scheduler.name}", logging.getLogger(__name__))
        started = False
        while not stopping:
            try:
                if not started:  # its stores may be away when it starts, too
                    scheduler.start()
                    started = True
                    self.stdout.write(f"scheduler {scheduler.name} started", ending="\n")
                    self.stdout.flush()
                scheduler.tick()
                outage.ok()
            except STORES_AWAY as exc:
                close_old_connections()
                time.sleep(outage.failed(exc))
        scheduler.stop()
        self.stdout.write(f"scheduler {scheduler.name} stopped")
