"""The identity of a call that leaves the process: a canonical hash of its request.

Pure: standard library only (and the core's canonical JSON). A forked run may replay the
calls its origin recorded (workflows/llm/replays.py): a call is answered from the record
only when its request hashes the same. What goes in:

- an LLM call (llm.chat, an llm.agent turn): provider, model, every message sent, the
  tools offered (their full specs) and the options (temperature, max_tokens);
- an agent's tool call: the tool (handler or workflow) and its arguments;
- an `http.request`: method, URL and JSON body (not the headers: they carry the attempt's
  idempotency key, and credentials).

Idempotency keys, time budgets and stream callbacks are not part of a request: they differ
between any two runs and change nothing the callee is asked. `summary` keeps, beside the
hash, a hash per message and one for the tools, so that a call that was not replayed can be
told apart from the nearest recorded one field by field (`differences`) without storing
every conversation again.
"""

from __future__ import annotations

import hashlib
from typing import Any

from workflows.core.definition import canonical_json
from workflows.core.outputdiff import diff_json

LLM, TOOL, HTTP = "llm", "tool", "http"
# A node's `cache` config (llm.chat, llm.agent, http.request GET; handlers/caching.py).
CACHE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "ttl_s": {
            "type": "integer",
            "minimum": 1,
            "maximum": 30 * 86400,
            "description": "Answer identical requests from the cache for this many seconds.",
        }
    },
    "required": ["ttl_s"],
    "additionalProperties": False,
}
LIVE, RECORDED, RECORDED_THEN_LIVE = "live", "recorded", "recorded-then-live"
MODES = (LIVE, RECORDED, RECORDED_THEN_LIVE)


def plain(value: Any) -> Any:
    """The value with integral floats spelled as integers (1.0 is sent as 1 means the same)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def digest(value: Any) -> str:
    """sha256 of the canonical JSON: key order and number spelling (1, 1.0) aside."""
    return hashlib.sha256(canonical_json(plain(value)).encode()).hexdigest()


def llm_request(
    provider: str,
    model: str,
    messages: list[dict[str, Any]],
    tools: list[Any] | None,
    options: dict[str, Any],
) -> dict[str, Any]:
    return {
        "kind": LLM,
        "provider": provider,
        "model": model,
        "messages": messages,
        "tools": tools or [],
        "options": options,
    }


def tool_request(tool: str, arguments: Any) -> dict[str, Any]:
    return {"kind": TOOL, "tool": tool, "arguments": arguments}


def http_request(method: str, url: str, body: dict[str, Any]) -> dict[str, Any]:
    """An http.request's identity: method, URL and body (`body`: httpx's keywords, {} or {"json": ...}).

    Headers are left out: they carry the attempt's Idempotency-Key, and credentials."""
    return {"kind": HTTP, "method": method, "url": url, "body": body}


def request_hash(request: dict[str, Any]) -> str:
    """The request's identity: its digest (key order and number spelling aside)."""
    return digest(request)


def summary(request: dict[str, Any]) -> dict[str, Any]:
    """What is kept of a request to explain a miss: small fields as they are, a hash per message,
    one for the tools, one for a tool's arguments."""
    if request["kind"] == TOOL:
        return {"kind": TOOL, "tool": request["tool"], "arguments": digest(request["arguments"])}
    if request["kind"] == HTTP:
        return {
            "kind": HTTP,
            "method": request["method"],
            "url": request["url"],
            "body": digest(request["body"]),
        }
    return {
        "kind": LLM,
        "provider": request["provider"],
        "model": request["model"],
        "messages": [digest(m) for m in request["messages"]],
        "tools": digest(request["tools"]),
        "options": request["options"],
    }


def differences(wanted: dict[str, Any], recorded: dict[str, Any], limit: int = 5) -> list[str]:
    """The JSON paths where two summaries differ (`$.messages[2]`, `$.options.temperature`), at most `limit`."""
    return [change.path for change in diff_json(recorded, wanted, limit).changes]
