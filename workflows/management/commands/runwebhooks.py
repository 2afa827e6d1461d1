from __future__ import annotations

import logging
import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand
from django.db import close_old_connections

from workflows.integrations import webhooks
from workflows.runtime.outages import STORES_AWAY, Outage

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
        outage = Outage("webhook dispatcher", log)
        while not stop.is_set():
            pause = options["interval"]
            try:
                done = webhooks.dispatch()
                outage.ok()
                if any(done.values()):
                    log.info("webhooks %s", done)
            except STORES_AWAY as exc:
                # Nothing is lost while a store is away: events stay in Postgres until read.
                close_old_connections()
                pause = max(pause, outage.failed(exc))
            if options["once"]:
                break
            stop.wait(pause)
        self.stdout.write("webhook dispatcher stopped")
