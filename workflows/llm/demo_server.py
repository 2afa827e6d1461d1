"""The demo provider: a scripted OpenAI-compatible server, so a fresh machine runs LLM nodes.

Not a model. It answers `POST /v1/chat/completions` by a script, streamed (server-sent
chunks, a word at a time, `WORD_DELAY_SECONDS` apart, so the text visibly grows) or whole:

- tools offered and no tool result in the messages yet: it calls the first tool whose
  argument schema it can fill (a string: the part of the user's message its `pattern`
  matches, else its default, else an id-like word such as `u-42` in the message, else the
  message; numbers 1, enums' first value; optional `..._id` strings when the message names
  one);
- otherwise: a text answer that quotes the user's message and the tool results it was given.

Token counts are words. `make run` starts it (`python -m workflows.llm.demo_server --port P`)
when no LLM_BASE_URL is set, and `manage.py bootstrap` registers it as the provider "demo",
flagged `demo`: every page that shows it says "Demo provider (scripted, not a real model)".
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "demo-scripted"
WORD_DELAY_SECONDS = 0.06
MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_QUOTE_WORDS = 40
ARGUMENT_PIECE_CHARS = 8  # a streamed tool call's arguments come in fragments this long
ID_LIKE = re.compile(r"\b[A-Za-z]+-[0-9]+\b")  # u-42, A-1001: what a user names a thing by


# --- the script -----------------------------------------------------------------------------


def script_reply(request: dict[str, Any]) -> dict[str, Any]:
    """Return the chat completion the script gives for a request."""
    messages = [m for m in request.get("messages", []) if isinstance(m, dict)]
    tools = [t for t in request.get("tools") or [] if isinstance(t, dict)]
    has_tool_result = any(m.get("role") == "tool" for m in messages)
    message: dict[str, Any]
    if tools and not has_tool_result:
        message = tool_message(tools, last_user_text(messages))
    else:
        message = {"role": "assistant", "content": text_answer(messages)}
    calls = message.get("tool_calls")
    prompt_words = sum(len(str(m.get("content") or "").split()) for m in messages)
    answer_words = len((message.get("content") or "").split()) + (
        len(json.dumps(calls).split()) if calls else 0
    )
    return {
        "id": f"chatcmpl-demo-{int(time.time() * 1000)}",
        "object": "chat.completion",
        "model": MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {
            "prompt_tokens": prompt_words,
            "completion_tokens": answer_words,
            "total_tokens": prompt_words + answer_words,
        },
    }


def last_user_text(messages: list[dict[str, Any]]) -> str:
    users = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
    return users[-1] if users else ""


def quote(text: str) -> str:
    words = text.split()
    return " ".join(words[:MAX_QUOTE_WORDS]) + (" ..." if len(words) > MAX_QUOTE_WORDS else "")


def text_answer(messages: list[dict[str, Any]]) -> str:
    """The scripted text: what was asked, and what the tools said."""
    results = [quote(str(m.get("content") or "")) for m in messages if m.get("role") == "tool"]
    asked = quote(last_user_text(messages)).rstrip(".")
    parts = [f"(Demo provider, scripted; not a real model.) You asked: {asked}."]
    if results:
        parts.append("The tools answered: " + "; ".join(results) + ".")
    parts.append("A real provider would answer here; an admin sets one up on the LLM page.")
    return " ".join(parts)


def tool_message(tools: list[dict[str, Any]], user_text: str) -> dict[str, Any]:
    """Call the first tool whose schema the script can fill; answer in text if none."""
    for tool in tools:
        offered = tool.get("function")
        function: dict[str, Any] = offered if isinstance(offered, dict) else {}
        name = function.get("name")
        arguments = fill(function.get("parameters") or {"type": "object"}, user_text)
        if isinstance(name, str) and name and arguments is not None:
            call = {
                "id": "call_demo_1",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            return {"role": "assistant", "content": None, "tool_calls": [call]}
    return {
        "role": "assistant",
        "content": "(Demo provider) No offered tool has arguments the script can fill.",
    }


def fill(schema: Any, text: str) -> Any:
    """Return a value that satisfies a simple JSON schema, or None when the script cannot."""
    if not isinstance(schema, dict):
        return None
    if "enum" in schema:
        return schema["enum"][0] if schema["enum"] else None
    kind = schema.get("type", "object")
    if kind == "string":
        return fill_string(schema, text)
    if "default" in schema:
        return schema["default"]
    if kind == "object":
        return fill_object(schema, text)
    simple = {
        "integer": max(1, int(schema.get("minimum", 1))),
        "boolean": True,
    }
    if kind == "number":
        return float(schema.get("minimum", 1))
    if kind == "array":
        return []
    return simple.get(kind) if isinstance(kind, str) else None


def fill_string(schema: dict[str, Any], text: str) -> str:
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            match = re.search(pattern.removeprefix("^").removesuffix("$"), text)
        except re.error:
            match = None
        if match:
            return match.group(0)
    default = schema.get("default")
    if isinstance(default, str):
        return default
    named = ID_LIKE.search(text)
    return named.group(0) if named else (text or "demo")[:100]


def fill_object(schema: dict[str, Any], text: str) -> dict[str, Any] | None:
    properties = schema.get("properties") or {}
    found: dict[str, Any] = {}
    for name in schema.get("required") or []:
        value = fill(properties.get(name, {"type": "string"}), text)
        if value is None:
            return None
        found[name] = value
    named = ID_LIKE.search(text)  # an optional id the message names: what the user means
    if named is None:
        return found
    for name, spec in properties.items():
        if (
            name not in found
            and name.endswith("_id")
            and isinstance(spec, dict)
            and spec.get("type") == "string"
        ):
            found[name] = named.group(0)
    return found


# --- the wire -------------------------------------------------------------------------------


def completion_chunks(completion: dict[str, Any]) -> list[bytes]:
    """Cut a chat completion into SSE chunks: text word by word, each tool call in pieces (its
    name, then its arguments a few characters at a time), then the finish reason, the usage
    and `data: [DONE]`."""
    model = completion.get("model", MODEL)
    choice = (completion.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    deltas: list[dict[str, Any]] = [{"role": "assistant"}]
    deltas += [{"content": piece} for piece in words(message.get("content") or "")]
    for index, tool_call in enumerate(message.get("tool_calls") or []):
        deltas += [{"tool_calls": [piece]} for piece in tool_call_pieces(index, tool_call)]
    finish = choice.get("finish_reason", "stop")
    events = [chunk(model, [{"index": 0, "delta": d, "finish_reason": None}]) for d in deltas]
    events.append(chunk(model, [{"index": 0, "delta": {}, "finish_reason": finish}]))
    if completion.get("usage"):
        events.append({**chunk(model, []), "usage": completion["usage"]})
    return [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events] + [b"data: [DONE]\n\n"]


def tool_call_pieces(index: int, tool_call: dict[str, Any]) -> list[dict[str, Any]]:
    """One tool call as OpenAI streams it: its index, id and name first (empty arguments),
    then the arguments in fragments of ARGUMENT_PIECE_CHARS, each under the same index."""
    function = tool_call.get("function") or {}
    arguments = function.get("arguments", "")
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    head = {
        "index": index,
        "id": tool_call.get("id"),
        "type": "function",
        "function": {"name": function.get("name"), "arguments": ""},
    }
    step = ARGUMENT_PIECE_CHARS
    rest = [
        {"index": index, "function": {"arguments": text[i : i + step]}} for i in range(0, len(text), step)
    ]
    return [head, *rest]


def chunk(model: str, choices: list[dict[str, Any]]) -> dict[str, Any]:
    return {"object": "chat.completion.chunk", "model": model, "choices": choices}


def words(text: str) -> list[str]:
    """Split text into words that keep their following space (joined, they give the text back)."""
    pieces = [word + " " for word in text.split(" ")]
    if pieces:
        pieces[-1] = pieces[-1][:-1]
    return [p for p in pieces if p]


class DemoHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: DemoServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per request would drown `make run`'s output

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            self.send_json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        else:
            self.send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if self.path.rstrip("/") != "/v1/chat/completions":
            self.send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        if length > MAX_BODY_BYTES:
            self.send_json(413, {"error": {"message": "request too large", "type": "invalid_request_error"}})
            return
        try:
            request = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self.send_json(
                400, {"error": {"message": "the body is not JSON", "type": "invalid_request_error"}}
            )
            return
        reply = script_reply(request if isinstance(request, dict) else {})
        if isinstance(request, dict) and request.get("stream") is True:
            self.send_stream(completion_chunks(reply))
        else:
            self.send_json(200, reply)

    def send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_stream(self, chunks: list[bytes]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for piece in chunks:
            try:
                self.wfile.write(piece)
                self.wfile.flush()
            except OSError:
                return  # the caller hung up (its timeout, a killed worker)
            time.sleep(self.server.word_delay)


class DemoServer(ThreadingHTTPServer):
    daemon_threads = True
    word_delay = WORD_DELAY_SECONDS

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a caller that hung up mid-stream is expected


def serve(host: str, port: int, word_delay: float = WORD_DELAY_SECONDS) -> DemoServer:
    """Start serving from a daemon thread; return the server (its port: server_address[1])."""
    server = DemoServer((host, port), DemoHandler)
    server.word_delay = word_delay
    threading.Thread(target=server.serve_forever, args=(0.2,), name="demo-llm", daemon=True).start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve the scripted demo LLM provider.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8011)
    parser.add_argument("--word-delay", type=float, default=WORD_DELAY_SECONDS)
    args = parser.parse_args()
    server = DemoServer((args.host, args.port), DemoHandler)
    server.word_delay = args.word_delay
    print(f"demo LLM provider at http://{args.host}:{server.server_address[1]}/v1", flush=True)
    try:
        server.serve_forever(0.2)
    except KeyboardInterrupt:
        server.server_close()


if __name__ == "__main__":
    main()
