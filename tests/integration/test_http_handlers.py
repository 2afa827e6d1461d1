"""http.request and llm.chat against real HTTP servers on local sockets (no mocks)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.fakes.llm_server import FakeLLMServer
from workflows import handlers
from workflows.handlers import builtin

BIG_BYTES = 4 * 1024 * 1024


# --- a small scripted HTTP server -------------------------------------------------------------


class Scripted(ThreadingHTTPServer):
    daemon_threads = True
    seen: list[dict[str, Any]]
    stopping: threading.Event

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients hang up on purpose in the size and timeout tests


class Routes(BaseHTTPRequestHandler):
    """Answer by path: /json, /text, /status/<code>, /big, /slow, /echo."""

    server: Scripted

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.route()

    def do_POST(self) -> None:
        self.route()

    def do_DELETE(self) -> None:
        self.route()

    def route(self) -> None:
        parts = urlsplit(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        request = {
            "method": self.command,
            "path": parts.path,
            "query": parse_qs(parts.query),
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "json": json.loads(body) if body else None,
        }
        self.server.seen.append(request)
        name = parts.path.strip("/").split("/")[0]
        getattr(self, f"answer_{name}", self.answer_missing)(parts, request)

    def reply(self, status: int, body: bytes, content_type: str, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def answer_json(self, parts: Any, request: dict[str, Any]) -> None:
        self.reply(200, b'{"ok": true, "items": [1, 2]}', "application/json; charset=utf-8")

    def answer_text(self, parts: Any, request: dict[str, Any]) -> None:
        self.reply(200, "héllo".encode("latin-1"), "text/plain; charset=latin-1", **{"X-Other": "dropped"})

    def answer_echo(self, parts: Any, request: dict[str, Any]) -> None:
        self.reply(201, json.dumps(request).encode(), "application/json")

    def answer_status(self, parts: Any, request: dict[str, Any]) -> None:
        code = int(parts.path.rsplit("/", 1)[1])
        self.reply(code, b"service sad today", "text/plain", Location="http://127.0.0.1:1/elsewhere")

    def answer_big(self, parts: Any, request: dict[str, Any]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if "declared" in parts.query:
            self.send_header("Content-Length", str(BIG_BYTES))
        self.end_headers()  # without a length, HTTP/1.0 ends the body at close: a stream
        chunk = b"x" * 65536
        for _ in range(BIG_BYTES // len(chunk)):
            self.wfile.write(chunk)

    def answer_slow(self, parts: Any, request: dict[str, Any]) -> None:
        if not self.server.stopping.wait(5):
            self.reply(200, b"{}", "application/json")

    def answer_missing(self, parts: Any, request: dict[str, Any]) -> None:
        self.reply(404, b"no such route", "text/plain")


@pytest.fixture
def server() -> Iterator[Scripted]:
    httpd = Scripted(("127.0.0.1", 0), Routes)
    httpd.seen, httpd.stopping = [], threading.Event()
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield httpd
    httpd.stopping.set()
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


def url(httpd: Scripted, path: str) -> str:
    host, port = httpd.server_address[:2]
    return f"http://{host}:{port}{path}"


def ctx(config: dict[str, Any], *, timeout: float = 30.0, **fields: Any) -> handlers.NodeContext:
    values: dict[str, Any] = {
        "run_id": 12,
        "node_id": "call_api",
        "attempt": 2,
        "idempotency_key": "12:call_api:2",
        "input": {},
        "upstream": {},
        "config": config,
        "deadline": time.monotonic() + timeout,
    }
    return handlers.NodeContext(**{**values, **fields})


def http(context: handlers.NodeContext) -> Any:
    return handlers.get_handler("http.request").func(context)


# --- http.request ---------------------------------------------------------------------------


def test_a_json_answer_returns_status_content_type_and_parsed_body(server: Scripted) -> None:
    out = http(ctx({"url": url(server, "/json")}))
    assert out == {
        "status": 200,
        "headers": {"content-type": "application/json; charset=utf-8"},
        "json": {"ok": True, "items": [1, 2]},
        "text": None,
    }


def test_a_text_answer_is_decoded_with_its_charset_and_only_content_type_is_kept(server: Scripted) -> None:
    out = http(ctx({"url": url(server, "/text")}))
    assert (out["json"], out["text"]) == (None, "héllo")
    assert out["headers"] == {"content-type": "text/plain; charset=latin-1"}


def test_post_sends_the_rendered_json_body_headers_and_idempotency_key(server: Scripted) -> None:
    config = {
        "url": url(server, "/echo/{input.user_id}?src={upstream.fetch.source}"),
        "method": "POST",
        "headers": {"X-Team": "agents"},
        "json": {"user": "{input.user_id}", "score": "{upstream.fetch.score}", "note": "hi {input.user_id}"},
    }
    context = ctx(config, input={"user_id": "u 7"}, upstream={"fetch": {"source": "crm", "score": 0.5}})
    out = http(context)
    assert out["status"] == 201
    seen = out["json"]
    assert (seen["method"], seen["path"], seen["query"]) == ("POST", "/echo/u%207", {"src": ["crm"]})
    assert seen["json"] == {"user": "u 7", "score": 0.5, "note": "hi u 7"}
    assert seen["headers"]["idempotency-key"] == "12:call_api:2"
    assert seen["headers"]["x-team"] == "agents"


def test_get_without_json_sends_no_body(server: Scripted) -> None:
    http(ctx({"url": url(server, "/echo")}))
    assert server.seen[-1]["json"] is None
    assert (
        "content-length" not in server.seen[-1]["headers"]
        or server.seen[-1]["headers"]["content-length"] == "0"
    )


@pytest.mark.parametrize("code", [404, 500, 302])
def test_a_status_outside_2xx_fails_naming_status_and_url(server: Scripted, code: int) -> None:
    target = url(server, f"/status/{code}")
    with pytest.raises(handlers.HandlerError) as err:
        http(ctx({"url": target, "method": "DELETE"}))
    message = str(err.value)
    assert f"DELETE {target} answered {code}" in message
    assert "service sad today" in message
    assert len(server.seen) == 1, "redirects are not followed"


@pytest.mark.parametrize("path", ["/big?declared", "/big"])
def test_a_body_over_max_bytes_is_aborted(server: Scripted, path: str) -> None:
    started = time.monotonic()
    with pytest.raises(handlers.HandlerError, match=r"larger than max_bytes \(10000 bytes\)"):
        http(ctx({"url": url(server, path), "max_bytes": 10_000}))
    assert time.monotonic() - started < 2


def test_max_bytes_defaults_to_the_setting(server: Scripted, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = {**builtin.FALLBACK_SETTINGS, "HTTP_MAX_RESPONSE_BYTES": 5}
    monkeypatch.setattr(builtin, "switchyard_settings", lambda: conf)
    with pytest.raises(handlers.HandlerError, match=r"max_bytes \(5 bytes\)"):
        http(ctx({"url": url(server, "/json")}))


def test_a_slow_server_times_out_at_the_configured_timeout(server: Scripted) -> None:
    started = time.monotonic()
    with pytest.raises(handlers.HandlerError, match=r"GET http://127.0.0.1:\d+/slow timed out after 0.3 s"):
        http(ctx({"url": url(server, "/slow"), "timeout_seconds": 0.3}))
    assert time.monotonic() - started < 2


def test_the_node_deadline_caps_the_timeout(server: Scripted) -> None:
    started = time.monotonic()
    with pytest.raises(handlers.HandlerError, match="timed out"):
        http(ctx({"url": url(server, "/slow"), "timeout_seconds": 60}, timeout=0.3))
    assert time.monotonic() - started < 2


def test_no_request_is_sent_once_the_deadline_has_passed(server: Scripted) -> None:
    with pytest.raises(handlers.HandlerError, match="no time left before node 'call_api'"):
        http(ctx({"url": url(server, "/json")}, timeout=-1))
    assert server.seen == []


def test_a_refused_connection_is_a_handler_error_without_the_query(server: Scripted) -> None:
    host, port = server.server_address[:2]
    server.shutdown()
    server.server_close()
    with pytest.raises(
        handlers.HandlerError, match=r"GET http://127.0.0.1:\d+/json\?\.\.\. failed: ConnectError"
    ) as err:
        http(ctx({"url": f"http://{host}:{port}/json?token=s3cret"}))
    assert "s3cret" not in str(err.value)


# --- llm.chat -------------------------------------------------------------------------------


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch, db: None) -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        use_llm(monkeypatch, fake)
        yield fake


def use_llm(monkeypatch: pytest.MonkeyPatch, fake: FakeLLMServer, **overrides: Any) -> None:
    conf = {
        **builtin.FALLBACK_SETTINGS,
        "LLM_BASE_URL": fake.base_url + "/",
        "LLM_MODEL": "tiny-1",
        **overrides,
    }
    monkeypatch.setattr(builtin, "switchyard_settings", lambda: conf)


def chat(context: handlers.NodeContext) -> Any:
    return handlers.get_handler("llm.chat").func(context)


def test_chat_renders_the_prompt_and_returns_content_model_and_usage(llm: FakeLLMServer) -> None:
    config = {
        "system": "You write for {input.audience}.",
        "prompt": "Summarise {upstream.fetch_profile.name} in {input.words} words.",
        "temperature": 0.2,
        "max_tokens": 50,
    }
    context = ctx(
        config, input={"audience": "operators", "words": 5}, upstream={"fetch_profile": {"name": "Ada"}}
    )
    out = chat(context)
    assert out["content"] == "echo: Summarise Ada in 5 words."
    assert out["model"] == "tiny-1"
    assert out["usage"]["total_tokens"] > 0
    (request,) = llm.requests
    assert request.path == "/v1/chat/completions"
    assert request.json == {
        "model": "tiny-1",
        "messages": [
            {"role": "system", "content": "You write for operators."},
            {"role": "user", "content": "Summarise Ada in 5 words."},
        ],
        "temperature": 0.2,
        "max_tokens": 50,
    }


def test_chat_sends_the_idempotency_key_and_no_authorization_without_a_key(llm: FakeLLMServer) -> None:
    chat(ctx({"prompt": "hi", "model": "other-model"}))
    (request,) = llm.requests
    assert request.headers["idempotency-key"] == "12:call_api:2"
    assert "authorization" not in request.headers
    assert request.json["model"] == "other-model"


def test_chat_sends_the_api_key_as_a_bearer_token(monkeypatch: pytest.MonkeyPatch, db: None) -> None:
    with FakeLLMServer(api_key="sk-test-123") as fake:
        use_llm(monkeypatch, fake, LLM_API_KEY="sk-test-123")
        assert chat(ctx({"prompt": "hi"}))["content"] == "echo: hi"
    assert fake.requests[0].headers["authorization"] == "Bearer sk-test-123"


def test_a_rejected_key_fails_with_a_hint_and_without_the_key(
    monkeypatch: pytest.MonkeyPatch, db: None
) -> None:
    with FakeLLMServer(api_key="right", reply=None) as fake:
        use_llm(monkeypatch, fake, LLM_API_KEY="wrong-key")
        fake.api_key = "right"
        with pytest.raises(handlers.HandlerError) as err:
            chat(ctx({"prompt": "hi"}))
    message = str(err.value)
    assert "answered 401" in message and "Incorrect API key provided." in message
    assert "Check the provider's API key." in message
    assert "provider 'default', model 'tiny-1'" in message and "node 'call_api'" in message
    assert "wrong-key" not in message


def test_a_server_error_fails_with_the_providers_message(llm: FakeLLMServer) -> None:
    llm.status, llm.reply = 503, {"error": {"message": "model is overloaded", "type": "server_error"}}
    with pytest.raises(
        handlers.HandlerError, match=r"POST http://127.0.0.1:\d+/v1/chat/completions answered 503"
    ):
        chat(ctx({"prompt": "hi"}))
    with pytest.raises(handlers.HandlerError, match="model is overloaded"):
        chat(ctx({"prompt": "hi"}))


@pytest.mark.parametrize(
    ("reply", "fragment"),
    [
        ("<html>gateway</html>", "is not JSON"),
        ({"choices": []}, "no choices[0].message"),
        ({"choices": [{"message": {"content": None}}]}, "no text and no tool calls"),
        (["not", "an", "object"], "no choices[0].message"),
    ],
)
def test_a_malformed_answer_fails_clearly(llm: FakeLLMServer, reply: Any, fragment: str) -> None:
    llm.reply = reply
    with pytest.raises(
        handlers.HandlerError,
        match=r"llm.chat node 'call_api': provider 'default', model 'tiny-1': the answer",
    ) as err:
        chat(ctx({"prompt": "hi"}))
    assert fragment in str(err.value)


def test_missing_usage_and_model_fall_back(llm: FakeLLMServer) -> None:
    llm.reply = {"choices": [{"message": {"role": "assistant", "content": "ok"}}]}
    assert chat(ctx({"prompt": "hi"})) == {
        "content": "ok",
        "finish_reason": None,
        "model": "tiny-1",
        "usage": {},
        "provider": "default",  # who answered (a node with fallbacks may be answered by another)
        "requested_model": "tiny-1",
    }


def test_a_slow_model_times_out(llm: FakeLLMServer) -> None:
    llm.delay = 5
    started = time.monotonic()
    with pytest.raises(handlers.HandlerError, match="timed out after 0.3 s"):
        chat(ctx({"prompt": "hi", "timeout_seconds": 0.3}))
    assert time.monotonic() - started < 2


def test_a_prompt_placeholder_without_a_value_fails_before_any_request(llm: FakeLLMServer) -> None:
    with pytest.raises(handlers.HandlerError, match=r"llm.chat config.prompt: placeholder \{input.topic\}"):
        chat(ctx({"prompt": "Write about {input.topic}"}))
    assert llm.requests == []
