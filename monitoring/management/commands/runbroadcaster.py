from __future__ import annotations

import asyncio
import signal
from typing import Any

from django.core.management.base import BaseCommand

from monitoring.services.broadcaster import Broadcaster, run_forever


class Command(BaseCommand):
    help = "Run the dashboard's broadcaster: coalesced live snapshots to the websockets, a few a second."

    def handle(self, *args: Any, **options: Any) -> None:
        asyncio.run(self.serve())

    async def serve(self) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        broadcaster = Broadcaster()
        self.stdout.write(f"broadcaster started (epoch {broadcaster.epoch})")
        self.stdout.flush()
        await run_forever(broadcaster, stop)
        self.stdout.write("broadcaster stopped")
