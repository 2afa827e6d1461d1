"""The HTTP server and handler the fakes here are built on: threaded, HTTP/1.1, and quiet.

No access log, and no traceback for a client that hung up mid-request: tests cut connections
on purpose (timeouts, killed workers), and the fakes' own records are what tests read.
"""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up is expected


class QuietHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the real services answer

    def log_message(self, format: str, *args: Any) -> None:
        pass
