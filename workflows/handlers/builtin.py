"""Built-in handlers: no-op, echo, input validation, delay, failure drills and HTTP request.

`llm.chat` lives in `workflows.llm.handler` (it needs the provider table).

Django settings are read lazily inside the handlers (`switchyard_settings`), with fallbacks
when no settings are configured, so this module imports and runs without Django.

Templates: string values in `http.request`'s `url` and `json` (and `llm.chat`'s `system` and
`prompt`) may contain `{input.key}` and `{upstream.node_id.key}` (dotted lookups through
objects and list indexes; nothing else is evaluated), and in a map node's items `{item}`,
`{item.key}` and `{index}` (core/placeholders.py holds the syntax). In a URL the substituted text is
percent-encoded, so run input can fill path segments and query values but never choose the
host. In `json` a string that is exactly one placeholder takes the value with its JSON type.

`http.request` also resolves `{secret.NAME}` in its `url`, `headers` and `json`, here, at call
time, from the secrets store (`workflows/store/secrets.py`); every placeholder is replaced in
one pass, so text that run input or an upstream output brings in is never read as a
reference (an input of `"{secret.TOKEN}"` stays that text). A placeholder whose root a
handler does not offer (a secret in an LLM prompt) is left as it is.
"""

from __future__ import annotations

import codecs
import contextlib
import datetime as dt
import json
import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import jsonschema

from workflows.core import callhash, secretrefs
from workflows.core.egress import EgressRefused, literal_refusal
from workflows.core.placeholders import INDEX, ITEM, PLACEHOLDER
from workflows.handlers import caching, egress, recordings
from workflows.handlers.registry import HandlerError, NodeContext, node, on_loop, run_sync
from workflows.store import redaction

log = logging.getLogger(__name__)

FALLBACK_SETTINGS: dict[str, Any] = {
    "HTTP_TIMEOUT_SECONDS": 30.0,
    "HTTP_MAX_RESPONSE_BYTES": 1024 * 1024,
    "LLM_BASE_URL": "http://127.0.0.1:11434/v1",
    "LLM_API_KEY": "",
    "LLM_MODEL": "gpt-4o-mini",
}
HTTP_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]
DELAY_STEP_SECONDS = 0.05
# Where the worker cannot set SIGALRM (not the main thread), core.delay stops by itself this
# long after the deadline; elsewhere the worker's own timeout always comes first.
DELAY_DEADLINE_GRACE_SECONDS = 0.5
USER_AGENT = "switchyard/1"
NO_CONFIG: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


def switchyard_settings() -> dict[str, Any]:
    """Return SWITCHYARD settings over the fallbacks; Django is consulted only if configured."""
    from django.conf import settings  # lazy: this module must import without Django set up

    if not settings.configured:
        return dict(FALLBACK_SETTINGS)
    return {**FALLBACK_SETTINGS, **getattr(settings, "SWITCHYARD", {})}


# --- core -----------------------------------------------------------------------------------


@node("core.noop", config_schema=NO_CONFIG, batchable=True)
def noop(ctx: NodeContext) -> dict[str, Any]:
    """Do nothing and return an empty object."""
    return {}


@node("core.echo", config_schema=NO_CONFIG, batchable=True)
def echo(ctx: NodeContext) -> dict[str, Any]:
    """Return the run input, the upstream outputs and the node config unchanged."""
    return {"input": ctx.input, "upstream": ctx.upstream, "config": ctx.config}


VALIDATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "schema": {
            # Resolved from the metaschemas bundled with jsonschema (no network): a schema
            # that is not one is refused with the definition, naming config.schema.
            "$ref": "https://json-schema.org/draft/2020-12/schema",
            "description": "The JSON schema (draft 2020-12) the run input must match.",
        }
    },
    "required": ["schema"],
    "additionalProperties": False,
}
VALIDATE_MAX_ERRORS = 5


@node("core.validate", config_schema=VALIDATE_SCHEMA, batchable=True)
def validate(ctx: NodeContext) -> dict[str, Any]:
    """Check the run input against `schema`; fail naming each offending field, else return the input.

    Put it first, and let later nodes read its output: a run started with bad input dies
    here, and replaying its dead letter with edited input carries the run on.
    """
    validator = jsonschema.Draft202012Validator(ctx.config["schema"])
    errors = sorted(validator.iter_errors(ctx.input), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        lines = [f"{_json_path(e.absolute_path)}: {e.message}" for e in errors[:VALIDATE_MAX_ERRORS]]
        more = f" (and {len(errors) - VALIDATE_MAX_ERRORS} more)" if len(errors) > VALIDATE_MAX_ERRORS else ""
        raise HandlerError("The run input does not match the schema: " + "; ".join(lines) + more)
    return ctx.input


def _json_path(parts: Iterable[Any]) -> str:
    """`input.user.tags[2]` for the path (user, tags, 2)."""
    return "input" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


DELAY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "seconds": {"type": "number", "minimum": 0, "maximum": 3600, "description": "How long to wait."}
    },
    "required": ["seconds"],
    "additionalProperties": False,
}


@node("core.delay", config_schema=DELAY_SCHEMA)
def delay(ctx: NodeContext) -> dict[str, Any]:
    """Wait for `seconds`, then return how long it waited.

    The worker's time limit ends the wait at the node's deadline; without one (a thread),
    the wait fails by itself shortly after the deadline.
    """
    seconds = float(ctx.config.get("seconds", 0))
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        if time.monotonic() > ctx.deadline + DELAY_DEADLINE_GRACE_SECONDS:
            raise HandlerError(f"core.delay: the node's deadline passed before {seconds:g} s were up.")
        time.sleep(min(DELAY_STEP_SECONDS, left))
    return {"slept": ctx.config.get("seconds", 0)}


FAIL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"message": {"type": "string", "maxLength": 1000, "description": "The error to raise."}},
    "additionalProperties": False,
}


@node("core.fail", config_schema=FAIL_SCHEMA, batchable=True)
def fail(ctx: NodeContext) -> None:
    """Always fail with `message` (for drills and dead-letter demos)."""
    raise HandlerError(ctx.config.get("message") or "core.fail: deliberate failure (drill).")


FLAKY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "succeed_on_attempt": {
            "type": "integer",
            "minimum": 1,
            "maximum": 50,
            "default": 2,
            "description": "The first attempt that succeeds; earlier attempts fail.",
        }
    },
    "additionalProperties": False,
}


@node("core.flaky", config_schema=FLAKY_SCHEMA, batchable=True)
def flaky(ctx: NodeContext) -> dict[str, Any]:
    """Fail until attempt `succeed_on_attempt`, then return the attempt number."""
    target = int(ctx.config.get("succeed_on_attempt", 2))
    log.info("core.flaky: attempt %d of node %s; attempt %d succeeds", ctx.attempt, ctx.node_id, target)
    if ctx.attempt < target:
        raise HandlerError(f"core.flaky: attempt {ctx.attempt} fails on purpose; attempt {target} succeeds.")
    return {"attempt": ctx.attempt}


# --- templates ------------------------------------------------------------------------------


class SecretValues(Mapping[str, str]):
    """The `secret` root of `request_sources`: a lookup reveals one secret from the store (once
    per request). Made by `prefetched_secrets`, it holds the values already and reads nothing
    (a slot's coroutine may not touch the ORM: runtime/offload.py)."""

    def __init__(self, found: dict[str, str | None] | None = None) -> None:
        self.fetch = found is None
        self.found: dict[str, str | None] = found or {}

    def __getitem__(self, name: str) -> str:
        if self.fetch and name not in self.found:
            from workflows.store import secrets  # lazy: this module imports without Django set up

            self.found[name] = secrets.reveal(name)
        value = self.found.get(name)
        if value is None:
            raise KeyError(name)
        return value

    def __contains__(self, name: object) -> bool:
        try:
            self[str(name)]
        except KeyError:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def prefetched_secrets(ctx: NodeContext) -> SecretValues:
    """Reveal every secret `http.request`'s config references (sync: call it off the loop)."""
    values = SecretValues()
    for field in secretrefs.RESOLVED_IN["http.request"]:
        for _, text in secretrefs.strings_in(ctx.config.get(field), field):
            for name in secretrefs.names_in(text):
                values.get(name)  # reveals it, or records that it is missing
    return SecretValues(values.found)


def outbound_traceparent(ctx: NodeContext) -> str | None:
    """The W3C `traceparent` the attempt's call carries: the run's trace, the attempt's span
    (store/traceids.py); None for a context made outside a worker (no attempt row)."""
    if not ctx.node_run_id:
        return None
    from workflows.store import traceids  # lazy: this module imports without Django set up

    return traceids.traceparent_of(ctx.run_id, ctx.node_id, ctx.attempt)


def prepared_call(ctx: NodeContext) -> tuple[SecretValues, str | None]:
    """What a slot's `http.request` reads from PostgreSQL before its call, in one hop off the loop."""
    return prefetched_secrets(ctx), outbound_traceparent(ctx)


def template_sources(ctx: NodeContext) -> dict[str, Any]:
    """Return what placeholders may look up: the run input, the upstream outputs and, for a
    map node's item, the item and its index."""
    sources = {"input": ctx.input, "upstream": ctx.upstream}
    return sources if ctx.index is None else {**sources, ITEM: ctx.item, INDEX: ctx.index}


def request_sources(ctx: NodeContext, secrets: SecretValues | None = None) -> dict[str, Any]:
    """`template_sources` and the secrets store: what `http.request`'s placeholders may look up."""
    return {**template_sources(ctx), "secret": secrets if secrets is not None else SecretValues()}


def lookup(sources: Mapping[str, Any], root: str, path: str, where: str) -> Any:
    """Follow a dotted path through objects and list indexes; raise HandlerError if absent.

    The run's input and its upstream outputs are fixed for the attempt's every retry, so an
    absent value is not retryable: the error says what to start (or replay) the run with.
    """
    if root == "secret" and path.count(".") != 1:
        raise HandlerError(f"{where}: {{secret{path}}} must name one secret, as {{secret.NAME}}.")
    value = sources[root]
    segments = path.split(".")[1:]
    for depth, segment in enumerate(segments):
        if isinstance(value, Mapping) and segment in value:
            value = value[segment]
        elif isinstance(value, list) and segment.isdigit() and int(segment) < len(value):
            value = value[int(segment)]
        else:
            why = absent_value(root, segments, depth, sources.get(INDEX))
            missing = f"{where}: placeholder {{{root}{path}}}: {why}"
            raise HandlerError(missing, retryable=False)
    return value


def absent_value(root: str, segments: list[str], depth: int, index: Any = None) -> str:
    """Say which value a placeholder lacks and how a person provides it."""
    if root == "secret":
        return f"there is no secret `{segments[0]}`; an admin adds it on the secrets page."
    if root in (ITEM, INDEX):
        return absent_in_item(root, segments, depth, index)
    if root == "input":
        field = ".".join(segments[: depth + 1])
        example = json.dumps(nested_example(segments[: depth + 1]))
        return (
            f"the run's input has no `{field}`; start the run with an input that has it, such as "
            f"{example}, or replay this node with edited input."
        )
    if depth == 0:
        return (
            f"no output of node `{segments[0]}` was given to this node; make `{segments[0]}` a "
            "direct predecessor, or fix the placeholder."
        )
    field = ".".join(segments[1 : depth + 1])
    return (
        f"the output of node `{segments[0]}` has no `{field}`; fix the placeholder, or make "
        f"`{segments[0]}` return it."
    )


def absent_in_item(root: str, segments: list[str], depth: int, index: Any) -> str:
    """Say which field a map item lacks, naming the item by its index."""
    if root == INDEX:
        return f"the index of item {index} is the number {index}; it has no fields, so write {{index}}."
    field = ".".join(segments[: depth + 1])
    return (
        f"item {index} of the map has no `{field}`; fix the map's list (its expression or the data "
        "it reads), or the placeholder, then replay the item."
    )


def nested_example(segments: list[str]) -> Any:
    """`{"a": {"b": "..."}}` for the path a.b: an input shape that provides it."""
    value: Any = "..."
    for segment in reversed(segments):
        value = [value] if segment.isdigit() else {segment: value}
    return value


def as_text(value: Any) -> str:
    """Render a looked-up value into a template: strings as they are, the rest as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def render_template(
    template: str, sources: Mapping[str, Any], where: str, escape: Callable[[str], str] = str
) -> str:
    """Substitute every placeholder whose root is in `sources`; leave other braces alone."""

    def replace(match: re.Match[str]) -> str:
        if match[1] not in sources:
            return match[0]
        return escape(as_text(lookup(sources, match[1], match[2], where)))

    return PLACEHOLDER.sub(replace, template)


def render_value(value: Any, sources: Mapping[str, Any], where: str) -> Any:
    """Render placeholders in every string of a JSON value; a lone placeholder keeps its type."""
    if isinstance(value, str):
        whole = PLACEHOLDER.fullmatch(value)
        if whole and whole[1] in sources:
            return lookup(sources, whole[1], whole[2], where)
        return render_template(value, sources, where)
    if isinstance(value, list):
        return [render_value(item, sources, where) for item in value]
    if isinstance(value, dict):
        return {key: render_value(item, sources, where) for key, item in value.items()}
    return value


# --- HTTP plumbing --------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """Hold a finished HTTP exchange whose body stayed under the size limit."""

    status: int
    reason: str
    content_type: str
    encoding: str
    body: bytes

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def text(self) -> str:
        return self.body.decode(self.encoding, errors="replace")


def shown_url(url: str) -> str:
    """Return the URL for messages: no credentials, no query string (either may be secret)."""
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    query = "?..." if parts.query else ""
    return f"{parts.scheme}://{host}{parts.path}{query}"


def time_budget(ctx: NodeContext, configured: float | None, where: str) -> float:
    """Return the request timeout: the configured one, cut to what is left of the attempt."""
    wanted = float(configured or switchyard_settings()["HTTP_TIMEOUT_SECONDS"])
    budget = min(wanted, ctx.remaining())
    if budget <= 0:
        raise HandlerError(f"{where}: no time left before node {ctx.node_id!r} reaches its deadline.")
    return budget


@contextlib.contextmanager
def told_as_handler_errors(label: str, timeout: float) -> Iterator[None]:
    """Turn what httpx (and the egress policy) raise into a HandlerError naming the call."""
    try:
        yield
    except EgressRefused as exc:
        raise HandlerError(f"{label}: {exc}") from None
    except httpx.TimeoutException as exc:
        raise HandlerError(f"{label} timed out after {timeout:.3g} s.") from exc
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise HandlerError(f"{label} failed: {type(exc).__name__}: {exc}") from exc


def reply_of(response: httpx.Response, data: bytes) -> Reply:
    return Reply(
        response.status_code,
        response.reason_phrase,
        response.headers.get("content-type", ""),
        known_encoding(response.charset_encoding),
        data,
    )


def send(
    method: str,
    url: str,
    *,
    headers: httpx.Headers,
    body: dict[str, Any],
    timeout: float,
    max_bytes: int,
    where: str,
) -> Reply:
    """Send one request and read its body, within `timeout` overall and `max_bytes`."""
    label = f"{where}: {method} {shown_url(url)}"
    body_of = CappedBody(max_bytes, time.monotonic() + timeout, label)
    with (
        told_as_handler_errors(label, timeout),
        egress.client(timeout=timeout, follow_redirects=False) as client,
        client.stream(method, url, headers=headers, **body) as response,
    ):
        body_of.check_declared(response)
        for chunk in response.iter_bytes():
            body_of.add(chunk)
    return reply_of(response, body_of.data())


async def asend(
    method: str,
    url: str,
    *,
    headers: httpx.Headers,
    body: dict[str, Any],
    timeout: float,
    max_bytes: int,
    where: str,
) -> Reply:
    """`send`, awaited (a client per request, as `send`: redirects and pools stay per call)."""
    label = f"{where}: {method} {shown_url(url)}"
    body_of = CappedBody(max_bytes, time.monotonic() + timeout, label)
    with told_as_handler_errors(label, timeout):
        async with (
            egress.async_client(timeout=timeout, follow_redirects=False) as client,
            client.stream(method, url, headers=headers, **body) as response,
        ):
            body_of.check_declared(response)
            async for chunk in response.aiter_bytes():
                body_of.add(chunk)
    return reply_of(response, body_of.data())


class CappedBody:
    """A streamed body read up to `max_bytes` and a deadline, refused with a HandlerError past either."""

    def __init__(self, max_bytes: int, deadline: float, label: str) -> None:
        self.max_bytes, self.deadline, self.label = max_bytes, deadline, label
        self.chunks: list[bytes] = []
        self.size = 0

    def too_big(self) -> HandlerError:
        return HandlerError(
            f"{self.label}: the response is larger than max_bytes ({self.max_bytes} bytes); raise max_bytes."
        )

    def check_declared(self, response: httpx.Response) -> None:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            raise self.too_big()

    def add(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.max_bytes:
            raise self.too_big()
        if time.monotonic() > self.deadline:
            raise HandlerError(f"{self.label} timed out while reading the response.")
        self.chunks.append(chunk)

    def data(self) -> bytes:
        return b"".join(self.chunks)


def known_encoding(name: str | None) -> str:
    """Return `name` if Python knows the codec, else UTF-8."""
    if name:
        try:
            return codecs.lookup(name).name
        except LookupError:
            pass
    return "utf-8"


def is_json_type(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def snippet(text: str, limit: int = 200) -> str:
    """Return the start of a body on one line, for error messages."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "..."


# --- http.request ---------------------------------------------------------------------------

HTTP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "url": {
            "type": "string",
            "pattern": "^https?://",
            "maxLength": 4096,
            "description": (
                "http:// or https:// URL; may contain {input.key} and {upstream.node.key}, and in a "
                "map node {item.key} and {index} (percent-encoded)."
            ),
        },
        "method": {"enum": HTTP_METHODS, "default": "GET"},
        "headers": {"type": "object", "additionalProperties": {"type": "string"}},
        "json": {"description": "Request body, sent as JSON; strings may contain placeholders."},
        "timeout_seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": 3600},
        "max_bytes": {"type": "integer", "minimum": 1, "maximum": 1024 * 1024 * 1024},
        "cache": {
            **caching.CACHE_SCHEMA,
            "description": "GET only: answer identical requests from the cache.",
        },
    },
    "required": ["url"],
    "additionalProperties": False,
    # Only a GET may be answered from the cache: it reads, it changes nothing.
    "if": {"required": ["cache"]},
    "then": {"properties": {"method": {"const": "GET"}}},
}


@node("http.request", config_schema=HTTP_SCHEMA)
def http_request(ctx: NodeContext) -> dict[str, Any]:
    """Send an HTTP request and return its status, content type and JSON or text body.

    Sends `Idempotency-Key: run:node:attempt` and a W3C `traceparent` (the run's trace, the
    attempt's span: the server's spans join the run's trace). In a fork that replays its
    origin's calls, a request recorded there (same method, URL and body) is answered from the
    record (handlers/recordings.py); requests and answers are recorded with secrets redacted
    (`[secret:NAME]`), so a record holds no value and a rotated secret still replays.
    Redirects are not followed; any status
    outside 2xx fails the attempt. The body is capped at `max_bytes`. The connection goes
    only to addresses the egress policy allows (SWITCHYARD_EGRESS_ALLOW; loopback, private,
    link-local and metadata addresses are refused by default).
    """
    where = "http.request"
    sources = request_sources(ctx)
    url = request_url(ctx, where, sources)
    method = str(ctx.config.get("method", "GET")).upper()
    if method not in HTTP_METHODS:
        raise HandlerError(
            f"{where}: config.method must be one of {', '.join(HTTP_METHODS)}, not {method!r}."
        )
    body = request_body(ctx, where, sources)
    request = recorded_request(method, url, body)
    recorded = recordings.recorded_answer(ctx, request, "")
    if recorded is not None:
        return dict(recorded.response or {})
    headers = request_headers(ctx, sources, outbound_traceparent(ctx))
    ttl, key = http_cache_key(ctx, method, url, headers)
    if ttl and (hit := caching.lookup(key, utcnow())) is not None:
        return {**hit.response, "cached": caching.provenance(hit)}
    reply = send(
        method,
        url,
        headers=headers,
        body=body,
        timeout=time_budget(ctx, ctx.config.get("timeout_seconds"), where),
        max_bytes=int(ctx.config.get("max_bytes") or switchyard_settings()["HTTP_MAX_RESPONSE_BYTES"]),
        where=where,
    )
    output = http_output(checked(reply, method, url, where))
    recordings.record_live(ctx, request, redaction.redact_value(output), "")
    if ttl:
        caching.store(ctx, callhash.HTTP, key, output, {}, ttl, utcnow())
    return output


@on_loop("http.request")
async def http_request_on_loop(ctx: NodeContext) -> dict[str, Any]:
    """`http_request` in a worker's slot, awaited on httpx's AsyncClient."""
    where = "http.request"
    secrets, traceparent = await run_sync(prepared_call, ctx)
    sources = request_sources(ctx, secrets)
    url = request_url(ctx, where, sources)
    method = str(ctx.config.get("method", "GET")).upper()
    if method not in HTTP_METHODS:
        raise HandlerError(
            f"{where}: config.method must be one of {', '.join(HTTP_METHODS)}, not {method!r}."
        )
    body = request_body(ctx, where, sources)
    request = recorded_request(method, url, body)
    recorded = await recordings.arecorded_answer(ctx, request, "")
    if recorded is not None:
        return dict(recorded.response or {})
    headers = request_headers(ctx, sources, traceparent)
    ttl, key = http_cache_key(ctx, method, url, headers)
    if ttl and (hit := await run_sync(caching.lookup, key, utcnow())) is not None:
        return {**hit.response, "cached": caching.provenance(hit)}
    reply = await asend(
        method,
        url,
        headers=headers,
        body=body,
        timeout=time_budget(ctx, ctx.config.get("timeout_seconds"), where),
        max_bytes=int(ctx.config.get("max_bytes") or switchyard_settings()["HTTP_MAX_RESPONSE_BYTES"]),
        where=where,
    )
    output = http_output(checked(reply, method, url, where))
    await recordings.arecord_live(ctx, request, redaction.redact_value(output), "")
    if ttl:
        await run_sync(caching.store, ctx, callhash.HTTP, key, output, {}, ttl, utcnow())
    return output


def http_cache_key(ctx: NodeContext, method: str, url: str, headers: httpx.Headers) -> tuple[int | None, str]:
    """(TTL, cache key) of a GET whose node caches (handlers/caching.py); (None, "") otherwise."""
    ttl = caching.ttl_of(ctx) if method == "GET" else None
    if not ttl:
        return None, ""
    return ttl, caching.key_of(caching.http_key_request(url, dict(headers.items())))


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def recorded_request(method: str, url: str, body: dict[str, Any]) -> dict[str, Any]:
    """The request as recorded and hashed for replay: secret values replaced by their names."""
    return callhash.http_request(method, redaction.redact(url), redaction.redact_value(body))


def checked(reply: Reply, method: str, url: str, where: str) -> Reply:
    """The reply if it is 2xx; else the HandlerError that fails the attempt, with the body's start."""
    if not reply.ok:
        detail = snippet(reply.text())
        raise HandlerError(
            f"{where}: {method} {shown_url(url)} answered {reply.status} {reply.reason}"
            + (f": {detail}" if detail else ".")
        )
    return reply


def request_url(ctx: NodeContext, where: str, sources: Mapping[str, Any] | None = None) -> str:
    """Render config.url (placeholders percent-encoded) and check it is http(s) with a host."""
    template = ctx.config.get("url")
    if not isinstance(template, str):
        raise HandlerError(f"{where}: config.url is required.")
    sources = request_sources(ctx) if sources is None else sources
    url = render_template(template, sources, f"{where} config.url", lambda s: quote(s, safe=""))
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname or not has_valid_port(url):
        raise HandlerError(f"{where}: config.url must be an http:// or https:// URL with a host.")
    # Before httpx reads the host: it refuses some spellings (0177.0.0.1) without naming a rule.
    refusal = literal_refusal(url, egress.current_policy())
    if refusal is not None:
        raise HandlerError(f"{where}: {shown_url(url)}: {refusal}")
    return url


def has_valid_port(url: str) -> bool:
    """Return False when the URL names a port that is not a number in 1..65535."""
    try:
        port = urlsplit(url).port
    except ValueError:
        return False
    return port is None or port > 0


def request_headers(
    ctx: NodeContext, sources: Mapping[str, Any], traceparent: str | None = None
) -> httpx.Headers:
    """Return the headers to send: ours first (the W3C `traceparent` among them), then
    config.headers (which may override), their placeholders (secrets included) rendered."""
    headers = httpx.Headers({"User-Agent": USER_AGENT, "Idempotency-Key": ctx.idempotency_key})
    if traceparent:
        headers["traceparent"] = traceparent
        headers["tracestate"] = f"switchyard=r:{ctx.run_id}"  # as store/traceids.tracestate_of
    for name, value in (ctx.config.get("headers") or {}).items():
        headers[name] = render_template(str(value), sources, f"http.request config.headers.{name}")
    return headers


def request_body(ctx: NodeContext, where: str, sources: Mapping[str, Any]) -> dict[str, Any]:
    """Return httpx keyword arguments for the body: `json` only if the config has one."""
    if "json" not in ctx.config:
        return {}
    return {"json": render_value(ctx.config["json"], sources, f"{where} config.json")}


def http_output(reply: Reply) -> dict[str, Any]:
    """Shape a successful reply into the node output."""
    headers = {"content-type": reply.content_type} if reply.content_type else {}
    text = reply.text()
    if is_json_type(reply.content_type) and text.strip():
        try:
            return {"status": reply.status, "headers": headers, "json": json.loads(text), "text": None}
        except ValueError:
            pass  # mislabelled: hand it over as text
    return {"status": reply.status, "headers": headers, "json": None, "text": text}
