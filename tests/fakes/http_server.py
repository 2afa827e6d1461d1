"""A fake HTTP server that holds each request, for `http.request` nodes and map items in slots.

    with HeldHTTPServer(delay=1.0) as server:
        ...  # http.request to server.url
        assert server.most_open <= 7

Every request is answered 200 with JSON `{"key": <its Idempotency-Key>, "path": ...}` after
`delay` seconds; with `gated=True` each waits first until `go` is set. It counts requests per
Idempotency-Key (`keys`: a map item's key is `run:node[index]:attempt`, so a key seen twice
is an item attempt sent twice), requests open now (`open`) and the most open at once
(`most_open`).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from types import TracebackType

from tests.fakes.quiet import QuietHandler, QuietServer


class _Server(QuietServer):
    request_queue_size = 1024  # a worker's slots connect by the hundred
    fake: HeldHTTPServer


class _Handler(QuietHandler):
    server: _Server

    def do_GET(self) -> None:
        fake = self.server.fake
        key = self.headers.get("Idempotency-Key", "")
        with fake.opened(key):
            if fake.gated:
                while not fake.go.wait(0.05):
                    if fake.stopping.is_set():
                        return
            if fake.delay and fake.stopping.wait(fake.delay):
                return
        body = json.dumps({"key": key, "path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class HeldHTTPServer:
    """Serve on 127.0.0.1 from a thread; hold each request `delay` s (and until `go` if gated)."""

    def __init__(self, *, delay: float = 0.0, gated: bool = False) -> None:
        self.delay = delay
        self.gated = gated
        self.go = threading.Event()
        self.stopping = threading.Event()
        self.keys: Counter[str] = Counter()
        self.open = 0
        self.most_open = 0
        self._lock = threading.Lock()
        self._server: _Server | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "the server is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def opened(self, key: str) -> _Open:
        return _Open(self, key)

    def start(self) -> HeldHTTPServer:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        self._server = None

    def __enter__(self) -> HeldHTTPServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class _Open:
    """Count a request as open while it is held."""

    def __init__(self, fake: HeldHTTPServer, key: str) -> None:
        self.fake, self.key = fake, key

    def __enter__(self) -> None:
        with self.fake._lock:
            self.fake.keys[self.key] += 1
            self.fake.open += 1
            self.fake.most_open = max(self.fake.most_open, self.fake.open)

    def __exit__(self, *exc: object) -> None:
        with self.fake._lock:
            self.fake.open -= 1
