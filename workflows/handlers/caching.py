"""The response cache of `llm.chat` and `http.request` GET nodes (`config.cache: {ttl_s}`).

Opt-in per node. A request identical to one answered within the TTL (an LLM call: provider,
model, messages, tools, options; an HTTP GET: URL and the node's own headers, not the
attempt's Idempotency-Key or traceparent) is answered from the cache without a call. The
key is `callhash.digest` of the request *as sent*, salted: a secret resolved into a
request changes the key (a rotated key never reads another's answers) but enters it only
through sha256, never in clear; the stored response is redacted (store/redaction.py) like
any recorded output. Rows live in PostgreSQL (store/responsecache.py): a Redis flush loses
nothing; a duty deletes expired rows (`prune_expired`).

Decided here: a hit's output is the recorded one plus `cached: {run, node, at}` naming the
run that paid; its LLM call row (llm/handler.py) records the tokens saved at cost 0 with
step "cached". A failed call is never cached. Two attempts missing at once both call, and
the later write wins (no lock around a call that may take minutes).
Beside the handlers, so the built-in http.request uses it; models are imported where used
(the handlers import without Django set up).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from workflows.core import callhash
from workflows.handlers.registry import NodeContext

if TYPE_CHECKING:
    from workflows.store.responsecache import CachedResponse

SALT = "switchyard-response-cache:v1"
PRUNE_EVERY_SECONDS = 60.0
PRUNE_BATCH = 5000
CACHE_SCHEMA = callhash.CACHE_SCHEMA
UNSENT_HEADERS = frozenset({"idempotency-key", "traceparent", "tracestate"})  # differ per attempt


def ttl_of(ctx: NodeContext) -> int | None:
    """The node's cache TTL in seconds, or None when it does not cache (nor outside an attempt)."""
    spec = ctx.config.get("cache")
    if not ctx.node_run_id or not isinstance(spec, dict):
        return None
    return int(spec["ttl_s"])


def key_of(request: dict[str, Any]) -> str:
    """The cache key of a request as sent: a salted digest, secrets included only hashed."""
    return callhash.digest({"salt": SALT, "request": request})


def http_key_request(url: str, headers: dict[str, str]) -> dict[str, Any]:
    """An HTTP GET's identity for the cache: URL and the headers the node sets."""
    kept = {k.lower(): v for k, v in headers.items() if k.lower() not in UNSENT_HEADERS}
    return {"kind": callhash.HTTP, "method": "GET", "url": url, "headers": kept}


def lookup(key: str, now: dt.datetime) -> CachedResponse | None:
    """The live entry for `key` (counted as a hit), or None."""
    from django.db.models import F

    from workflows.store.responsecache import CachedResponse

    found = CachedResponse.objects.filter(request_hash=key, expires_at__gt=now).first()
    if found is not None:
        CachedResponse.objects.filter(pk=found.pk).update(hits=F("hits") + 1)
    return found


def store(
    ctx: NodeContext, kind: str, key: str, response: Any, usage: dict[str, Any], ttl: int, now: dt.datetime
) -> None:
    """Keep a response (redacted) for `ttl` seconds; a newer answer replaces an older one."""
    from workflows.store import redaction
    from workflows.store.responsecache import CachedResponse

    CachedResponse.objects.update_or_create(
        request_hash=key,
        defaults={
            "kind": kind,
            "response": redaction.redact_value(response),
            "usage": usage,
            "run_id": ctx.run_id,
            "node_id": ctx.node_id,
            "expires_at": now + dt.timedelta(seconds=ttl),
            "hits": 0,
        },
    )


def provenance(entry: CachedResponse) -> dict[str, Any]:
    """What a hit's output says of where it came from."""
    return {"run": entry.run_id, "node": entry.node_id, "at": entry.created_at.isoformat()}


def prune_expired() -> int:
    """Delete expired entries, a batch at a time (a duty); return how many."""
    from django.utils import timezone

    from workflows.store.responsecache import CachedResponse

    ids = list(
        CachedResponse.objects.filter(expires_at__lte=timezone.now()).values_list("id", flat=True)[
            :PRUNE_BATCH
        ]
    )
    return CachedResponse.objects.filter(id__in=ids).delete()[0] if ids else 0
