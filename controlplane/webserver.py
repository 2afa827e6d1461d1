"""The web process: Daphne, which drains on SIGTERM instead of cutting what is in flight.

    python -m controlplane.webserver [daphne's options] controlplane.asgi:application

Daphne stops its reactor at SIGTERM and cancels every application at once: a request in
flight is cut, and its client sees the connection reset without an answer (`make chaos
ROLLING=1` counted one or two such per web restart). A restart then cost a careful client a
retry and an unsure one a doubt (was my start committed?). Here, at SIGTERM, the process
first stops listening (under `make run` and systemd the socket is shared, so the next process
takes the new connections), then lets the HTTP requests in flight finish, up to
SWITCHYARD_WEB_DRAIN_SECONDS (10 s), and only then stops as Daphne does. Server-Sent Event
streams and websockets are not waited for: they never end by themselves, and their clients
reconnect to the next process (a stream resumes from its Last-Event-ID).

The options are Daphne's own (`--fd`, `-b`/`-p`, `--proxy-headers`...), parsed by Daphne.

A web process keeps its PostgreSQL connections in a pool of POOL_SIZE (DB_POOL_SIZE,
settings.pool_options) unless DB_POOL_SIZE says otherwise: a connection per request, as
Django makes it under ASGI without one, cost a new PostgreSQL backend each time and held API
starts to about 90 a second on two cores (about 170 with the pool: docs/benchmarks.md).
Workers, schedulers and the broadcaster keep one connection each and use no pool.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any

from daphne.cli import CommandLineInterface
from daphne.http_protocol import WebRequest
from daphne.server import Server
from twisted.internet import defer

DRAIN_SECONDS = float(os.environ.get("SWITCHYARD_WEB_DRAIN_SECONDS", "10"))
POLL_SECONDS = 0.05
POOL_SIZE = 16
ACCEPTED_GRACE_SECONDS = 0.5


class DrainingServer(Server):  # type: ignore[misc]  # daphne is untyped (pyproject.toml): Server is Any
    """Daphne's server, whose shutdown waits for the HTTP requests in flight."""

    def run(self) -> None:
        self.ports: list[Any] = []
        super().run()

    def listen_success(self, port: Any) -> None:
        self.ports.append(port)
        super().listen_success(port)

    def kill_all_applications(self) -> defer.Deferred[Any]:
        """Daphne's "before shutdown" step, after the drain."""
        drained = defer.Deferred.fromFuture(asyncio.ensure_future(self.drain()))
        drained.addCallback(lambda _: Server.kill_all_applications(self))
        return drained

    async def drain(self) -> None:
        """Stop listening; return once no HTTP request is in flight, or at the deadline.

        A connection accepted just before the port closed has sent its request, but the
        reactor has not read it yet: it is no request in flight until it is read, and a
        drain that ended at once closed it unanswered (a client saw the server disconnect:
        1 of 112 requests in test_supervisor's rolling restart, on a loaded machine). So
        the drain waits at least ACCEPTED_GRACE_SECONDS, time for the reactor to read what
        such connections sent.
        """
        for port in self.ports:
            port.stopListening()
        now = time.monotonic()
        deadline, settled = now + DRAIN_SECONDS, now + min(ACCEPTED_GRACE_SECONDS, DRAIN_SECONDS)
        while (self.in_flight() or time.monotonic() < settled) and time.monotonic() < deadline:
            await asyncio.sleep(POLL_SECONDS)

    def in_flight(self) -> list[WebRequest]:
        """HTTP requests not yet answered in full, streams left out."""
        return [
            protocol
            for protocol, details in self.connections.items()
            if isinstance(protocol, WebRequest) and "disconnected" not in details and not is_stream(protocol)
        ]


def is_stream(request: WebRequest) -> bool:
    types = request.responseHeaders.getRawHeaders(b"content-type") or []
    return any(t.startswith(b"text/event-stream") for t in types)


def main(argv: list[str]) -> None:
    os.environ.setdefault("DB_POOL_SIZE", str(POOL_SIZE))  # read by the settings Daphne loads
    cli = CommandLineInterface()
    cli.server_class = DrainingServer
    cli.run(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
