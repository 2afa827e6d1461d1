from __future__ import annotations

import logging
import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand
from django.db import close_old_connections

from workflows import webhooks
from workflows.errors import STORES_AWAY

log = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Dispatch outbound webhooks: read run events, enqueue deliveries (RQ), retry what is due."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--interval", type=float, default=1.0, help="Seconds between rounds.")
        parser.add_argument("--once", action="store_true", help="Do one round and exit.")

    def handle(self, *args: Any, **options: Any) -> None:
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
        signal.signal(signal.SIGINT, lambda signum, frame: stop.set())
        self.stdout.write("webhook dispatcher started")
        self.stdout.flush()
        while not stop.is_set():
            try:
                done = webhooks.dispatch()
                if any(done.values()):
                    log.info("webhooks %s", done)
            except STORES_AWAY as exc:
                # Nothing is lost while a store is away: events stay in Postgres until read.
                log.warning("webhook dispatcher waiting for its stores: %s", exc)
                close_old_connections()
            if options["once"]:
                break
            stop.wait(options["interval"])
        self.stdout.write("webhook dispatcher stopped")
