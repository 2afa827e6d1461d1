"""A fake of Anthropic's Messages API (`POST /v1/messages`) on a real local socket.

    with FakeAnthropicServer(api_key="sk-ant-test") as fake:
        ...  # a provider of kind "anthropic" with base_url=fake.base_url
        assert fake.requests[0].json["system"] == "Be brief."

It speaks the wire format as Anthropic documents it: `x-api-key` and `anthropic-version`
headers required (401 authentication_error / 400 invalid_request_error otherwise), messages
of content blocks, `max_tokens` required, answers {"type": "message", "content": [text and
tool_use blocks], "stop_reason", "usage"}. A request with `"stream": true` gets server-sent
events as the API sends them: message_start (usage with the input tokens), a ping, for
each block content_block_start, its deltas (text_delta one word at a time; input_json_delta
the tool input's JSON in pieces of `json_piece` characters), content_block_stop, then
message_delta (stop_reason, output tokens) and message_stop.

By default it echoes the last user text. `reply` (a message dict, or a function of the
request JSON) scripts answers; `message(...)` builds one. `errors` is a list of scripted
refusals served first, one per request: (status, error type, headers), in the API's error
shape, e.g. (429, "rate_limit_error", {"retry-after": "1"}). `stream_error` makes a stream
send an `error` event (overloaded_error) after message_start; `drop_after=N` closes a
stream after N events.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from tests.fakes.quiet import QuietHandler, QuietServer

Reply = dict[str, Any] | Callable[[Any], dict[str, Any]]
ErrorScript = tuple[int, str, dict[str, str]]


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    json: Any = field(default=None)


def message(
    text: str = "",
    *tool_uses: tuple[str, str, dict[str, Any]],
    model: str = "claude-test-1",
    usage: dict[str, int] | None = None,
    stop_reason: str | None = None,
) -> dict[str, Any]:
    """An answer: text and tool_use blocks given as (id, name, input)."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool_use", "id": i, "name": n, "input": inp} for i, n, inp in tool_uses]
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason or ("tool_use" if tool_uses else "end_turn"),
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 10, "output_tokens": max(1, len(text.split()))},
    }


def echo(request: Any) -> dict[str, Any]:
    """Echo the last user text block."""
    said = ""
    for turn in request.get("messages", []) if isinstance(request, dict) else []:
        content = turn.get("content")
        if turn.get("role") == "user":
            said = (
                content
                if isinstance(content, str)
                else " ".join(b.get("text", "") for b in content if b.get("type") == "text")
            )
    return message(f"echo: {said}")


def events_of(answer: dict[str, Any], json_piece: int = 7) -> list[tuple[str, dict[str, Any]]]:
    """The server-sent events that stream `answer`, as the API sends them."""
    usage = dict(answer["usage"])
    start = {**answer, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start})
    ]
    events.append(("ping", {"type": "ping"}))
    for index, block in enumerate(answer["content"]):
        if block["type"] == "text":
            opening = {"type": "text", "text": ""}
            words = block["text"].split(" ")
            deltas = [{"type": "text_delta", "text": w if n == 0 else " " + w} for n, w in enumerate(words)]
        else:
            opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            text = json.dumps(block["input"]) if block["input"] else ""
            pieces = [text[i : i + json_piece] for i in range(0, len(text), json_piece)]
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in [""] + pieces]
        events.append(
            ("content_block_start", {"type": "content_block_start", "index": index, "content_block": opening})
        )
        events += [
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            for d in deltas
        ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    end = {"stop_reason": answer["stop_reason"], "stop_sequence": None}
    events.append(
        (
            "message_delta",
            {"type": "message_delta", "delta": end, "usage": {"output_tokens": usage["output_tokens"]}},
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


class _Server(QuietServer):
    fake: FakeAnthropicServer


class _Handler(QuietHandler):
    server: _Server

    def do_POST(self) -> None:
        fake = self.server.fake
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        headers = {k.lower(): v for k, v in self.headers.items()}
        fake.record(RecordedRequest("POST", self.path, headers, parsed))
        scripted = fake.next_error()
        if self.path != "/v1/messages":
            self.error(404, "not_found_error", f"no route {self.path}")
        elif fake.api_key and headers.get("x-api-key") != fake.api_key:
            self.error(401, "authentication_error", "invalid x-api-key")
        elif not headers.get("anthropic-version"):
            self.error(400, "invalid_request_error", "anthropic-version: header is required")
        elif not isinstance(parsed, dict) or not isinstance(parsed.get("max_tokens"), int):
            self.error(400, "invalid_request_error", "max_tokens: Field required")
        elif scripted is not None:
            self.error(scripted[0], scripted[1], f"scripted {scripted[1]}", scripted[2])
        elif parsed.get("stream") is True:
            self.stream(events_of(fake.answer(parsed), fake.json_piece), fake)
        else:
            self.send(200, fake.answer(parsed))

    def error(self, status: int, kind: str, text: str, headers: dict[str, str] | None = None) -> None:
        self.send(status, {"type": "error", "error": {"type": kind, "message": text}}, headers)

    def send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", "req_fake")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def stream(self, events: list[tuple[str, dict[str, Any]]], fake: FakeAnthropicServer) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        if fake.stream_error:
            failure = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
            events = events[:1] + [("error", failure)]
        for n, (name, data) in enumerate(events):
            if fake.drop_after is not None and n >= fake.drop_after:
                return
            try:
                self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()
            except OSError:
                return


class FakeAnthropicServer:
    """Serve `/v1/messages` on 127.0.0.1 from a thread; record every request."""

    def __init__(
        self, *, reply: Reply | None = None, api_key: str | None = None, json_piece: int = 7
    ) -> None:
        self.reply = reply
        self.api_key = api_key
        self.json_piece = json_piece
        self.errors: list[ErrorScript] = []
        self.stream_error = False
        self.drop_after: int | None = None
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The provider's base URL (the API's root; the client adds /v1/messages)."""
        if self._server is None:
            raise RuntimeError("FakeAnthropicServer is not started.")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def next_error(self) -> ErrorScript | None:
        with self._lock:
            return self.errors.pop(0) if self.errors else None

    def answer(self, request: Any) -> dict[str, Any]:
        if self.reply is None:
            return echo(request)
        return self.reply(request) if callable(self.reply) else self.reply

    def __enter__(self) -> FakeAnthropicServer:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
