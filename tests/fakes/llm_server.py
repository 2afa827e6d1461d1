"""A fake OpenAI-compatible chat completions server on a real local socket.

    with FakeLLMServer(api_key="sk-test") as llm:
        ...  # point LLM_BASE_URL at llm.base_url
        assert llm.requests[0].json["model"] == "gpt-4o-mini"

By default it answers `echo: <last user message>`. Set `reply` (a dict, text or bytes, or
a function of the request JSON), `status`, `delay` and `content_type` to script other
answers; change them between requests as needed. With `api_key` set, a request without
`Authorization: Bearer <api_key>` gets a 401 in OpenAI's error shape.

Streaming: a request with `"stream": true` whose reply is a completion (a dict with
`choices`) is sent as server-sent `chat.completion.chunk` events, one word of text (or one
piece of a tool call) a chunk, `chunk_delay` seconds apart, then a usage chunk and
`data: [DONE]`. `drop_after=N` closes the connection after N chunks (a dropped stream);
`hold_at=N` makes it wait before chunk N until `go` is set (the call stays open while a test
reads its first chunks, however slow the machine);
`bad_chunk_at=N` sends a chunk that is not JSON in place of chunk N; `streaming=False` makes
it answer streamed requests with one JSON body, as a provider that cannot stream.
`stream_chunks` (a list of chunk objects) is streamed as it is, then `data: [DONE]`, in place
of the cut reply: for malformed streams. With `gated=True` (or a function of the request JSON
saying which) every stream waits before its first chunk until `go` is set: a test holds hundreds of calls in flight at once (`open_streams`
counts them, `most_open` is the highest count seen, `held` how many waited for `go`).

Outages: `outage(fail_seconds, status, then_429_seconds, retry_after)` answers `status` (503)
to every chat request for `fail_seconds`, then 429 with a `Retry-After` header for
`then_429_seconds`, then normally again; `failing_models` (a set) limits it to those models.
`refused` counts the requests answered so. `rate_limit(limit, seconds)` answers 429 to a
request when `limit` others arrived in the `seconds` before it (a provider's own limit);
`rate_refused` counts those.

Run it alone for the demo: `python -m tests.fakes.llm_server --port 8011`.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from tests.fakes.quiet import QuietHandler, QuietServer
from workflows.llm.demo_server import completion_chunks

Reply = dict[str, Any] | str | bytes | Callable[[Any], Any]
DONE = b"data: [DONE]\n\n"


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it (header names lowercased)."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any = field(default=None)


def echo_completion(request: Any, model: str = "fake-model") -> dict[str, Any]:
    """Answer with the last user message, echoed, in the chat completions shape."""
    messages = request.get("messages", []) if isinstance(request, dict) else []
    users = [m.get("content", "") for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    content = f"echo: {users[-1] if users else ''}"
    prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in messages if isinstance(m, dict))
    completion_tokens = len(content.split())
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": request.get("model", model) if isinstance(request, dict) else model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


class _Server(QuietServer):
    request_queue_size = 1024  # hundreds of calls connect at once (a worker's slots)
    fake: FakeLLMServer


class _Handler(QuietHandler):
    server: _Server

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
        else:
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        fake = self.server.fake
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        parsed = _parse_json(body)
        headers = {k.lower(): v for k, v in self.headers.items()}
        fake.record(RecordedRequest("POST", self.path, headers, body, parsed))
        if fake.delay and fake.stopping.wait(fake.delay):
            return
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
        elif fake.api_key and headers.get("authorization") != f"Bearer {fake.api_key}":
            self._send(
                401, {"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error"}}
            )
        elif (refusal := fake.refusal(parsed)) is not None:
            status, extra = refusal
            self._send(
                status,
                {"error": {"message": f"fake outage: {status}", "type": "server_error"}},
                headers=extra,
            )
        else:
            answer = fake.answer(parsed)
            if fake.status == 200 and fake.stream_chunks is not None:
                self._stream([b"data: " + _encode(c) + b"\n\n" for c in fake.stream_chunks] + [DONE], fake)
            elif fake.status == 200 and fake.wants_stream(parsed, answer):
                self._stream(completion_chunks(answer), fake, fake.holds(parsed))
            else:
                self._send(fake.status, answer, fake.content_type)

    def _stream(self, chunks: list[bytes], fake: FakeLLMServer, hold: bool = False) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        with fake.streaming_now():
            self._send_chunks(chunks, fake, hold)

    def _send_chunks(self, chunks: list[bytes], fake: FakeLLMServer, hold: bool) -> None:
        if hold:
            fake.count_held()
            while not fake.go.wait(0.05):
                if fake.stopping.is_set():
                    return
        for n, chunk in enumerate(chunks):
            if fake.drop_after is not None and n >= fake.drop_after:
                return
            if n == fake.hold_at:
                while not fake.go.wait(0.05):
                    if fake.stopping.is_set():
                        return
            if fake.chunk_delay and fake.stopping.wait(fake.chunk_delay):
                return
            data = b"data: {not json\n\n" if n == fake.bad_chunk_at else chunk
            try:
                self.wfile.write(data)
                self.wfile.flush()
            except OSError:
                return  # the client hung up (a timeout, a killed worker)
            fake.chunks_sent += 1

    def _send(
        self,
        status: int,
        payload: Any,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        data = payload if isinstance(payload, bytes) else _encode(payload)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _parse_json(body: bytes) -> Any:
    try:
        return json.loads(body) if body else None
    except ValueError:
        return None


def _encode(payload: Any) -> bytes:
    return payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()


class FakeLLMServer:
    """Serve `/v1/chat/completions` on 127.0.0.1 from a thread; record every request."""

    def __init__(
        self,
        *,
        reply: Reply | None = None,
        status: int = 200,
        delay: float = 0.0,
        api_key: str | None = None,
        content_type: str = "application/json",
        host: str = "127.0.0.1",
        port: int = 0,
        streaming: bool = True,
        chunk_delay: float = 0.0,
        gated: bool | Callable[[Any], bool] = False,
    ) -> None:
        self.reply = reply
        self.status = status
        self.delay = delay
        self.api_key = api_key
        self.content_type = content_type
        self.streaming = streaming
        self.chunk_delay = chunk_delay
        self.drop_after: int | None = None
        self.hold_at: int | None = None
        self.bad_chunk_at: int | None = None
        self.stream_chunks: list[dict[str, Any]] | None = None
        self.chunks_sent = 0
        self.gated = gated
        self.go = threading.Event()
        self.open_streams = 0
        self.held = 0  # streams that waited for `go` (each counted once)
        self.most_open = 0
        self.requests: list[RecordedRequest] = []
        self.stopping = threading.Event()
        self.failing_models: set[str] | None = None
        self.refused = 0
        self.rate_refused = 0
        self._phases: list[tuple[float, int, int | str | None]] = []  # (ends at, status, retry-after)
        self._outage: tuple[float, int, float, int | str] | None = (
            None  # phases to start at the first request
        )
        self._429_left = 0  # requests after the phases that get a 429 whatever the time
        self._retry_after: int | str = 1
        self._limit: tuple[int, float] | None = None
        self._arrivals: list[float] = []
        self._lock = threading.Lock()
        self._address = (host, port)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """Return the OpenAI-style base URL (ending in /v1), for LLM_BASE_URL."""
        if self._server is None:
            raise RuntimeError("FakeLLMServer is not started.")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> FakeLLMServer:
        """Bind the socket and serve from a daemon thread."""
        self.stopping.clear()
        self._server = _Server(self._address, _Handler)
        self._server.fake = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fake-llm", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Wake delayed requests, stop serving and close the socket."""
        self.stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    @contextmanager
    def streaming_now(self) -> Iterator[None]:
        """Count a stream as open while it is being sent."""
        with self._lock:
            self.open_streams += 1
            self.most_open = max(self.most_open, self.open_streams)
        try:
            yield
        finally:
            with self._lock:
                self.open_streams -= 1

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def wants_stream(self, request: Any, answer: Any) -> bool:
        """Stream when asked to, able to, and the answer is a completion."""
        asked = isinstance(request, dict) and request.get("stream") is True
        return self.streaming and asked and isinstance(answer, dict) and "choices" in answer

    def count_held(self) -> None:
        with self._lock:
            self.held += 1

    def holds(self, request: Any) -> bool:
        """Whether this request's stream waits for `go` (see `gated`)."""
        return self.gated(request) if callable(self.gated) else self.gated

    def outage(
        self,
        fail_seconds: float,
        status: int = 503,
        then_429_seconds: float = 0.0,
        retry_after: int | str = 1,
        *,
        then_429_requests: int = 0,
        from_first_request: bool = False,
    ) -> None:
        """Answer `status` for `fail_seconds` from now, then 429 with Retry-After (seconds, or
        an HTTP date as text) for `then_429_seconds`, and to at least the first
        `then_429_requests` requests after the `status` phase whatever the time. With
        `from_first_request`, the seconds count from the first request, not from now (a loaded
        machine may start the runs seconds late)."""
        with self._lock:
            self._retry_after, self._429_left = retry_after, then_429_requests
            self._outage = (fail_seconds, status, then_429_seconds, retry_after)
            self._phases = []
            if not from_first_request:
                self._start_outage(time.monotonic())

    def _start_outage(self, now: float) -> None:
        if self._outage is None:
            return
        fail_seconds, status, then_429_seconds, retry_after = self._outage
        self._outage = None
        self._phases = [
            (now + fail_seconds, status, None),
            (now + fail_seconds + then_429_seconds, 429, retry_after),
        ]

    def rate_limit(self, limit: int, seconds: float) -> None:
        """Answer 429 to a request when `limit` others arrived within `seconds` before it."""
        self._limit = (limit, seconds)

    def refusal(self, request: Any) -> tuple[int, dict[str, str]] | None:
        """The status and headers of a scripted refusal of this request, or None: answer it."""
        now = time.monotonic()
        model = request.get("model") if isinstance(request, dict) else None
        with self._lock:
            if self._limit is not None:
                limit, seconds = self._limit
                self._arrivals = [t for t in self._arrivals if t > now - seconds]
                if len(self._arrivals) >= limit:
                    self.rate_refused += 1
                    return 429, {}
                self._arrivals.append(now)
            if self.failing_models is not None and model not in self.failing_models:
                return None
            self._start_outage(now)
            for ends, status, retry_after in self._phases:
                if now < ends:
                    if status == 429:
                        self._429_left = max(0, self._429_left - 1)
                    self.refused += 1
                    return status, ({"Retry-After": str(retry_after)} if retry_after is not None else {})
            if self._429_left > 0:
                self._429_left -= 1
                self.refused += 1
                return 429, {"Retry-After": str(self._retry_after)}
        return None

    def answer(self, request: Any) -> Any:
        """Return the configured reply for a request, or the echo completion."""
        if self.reply is None:
            return echo_completion(request)
        if callable(self.reply):
            return self.reply(request)
        return self.reply

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def main() -> None:
    """Serve until interrupted; print the base URL to put in LLM_BASE_URL."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8011)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds to wait before each answer")
    parser.add_argument("--api-key", default=None, help="require this bearer token")
    parser.add_argument("--chunk-delay", type=float, default=0.0, help="seconds between stream chunks")
    args = parser.parse_args()
    server = FakeLLMServer(
        host=args.host, port=args.port, delay=args.delay, api_key=args.api_key, chunk_delay=args.chunk_delay
    ).start()
    print(f"LLM_BASE_URL={server.base_url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
