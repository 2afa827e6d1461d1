"""Webhooks: signed inbound triggers that start runs, and signed outbound event deliveries.

Signature (both directions): `X-Switchyard-Signature: sha256=<hex>`, the HMAC-SHA256 with
the trigger's or subscription's secret of
`<X-Switchyard-Timestamp>.<X-Switchyard-Delivery>.<raw body>`, the timestamp in Unix seconds.
The delivery id is signed because it decides whether a delivery starts a run: unsigned, a
captured request replayed under new ids within the tolerance started a new run each time.

Inbound: a timestamp more than WEBHOOK_TOLERANCE_SECONDS away from now is refused, so a
captured request cannot be replayed later; within that window a delivery id is used once:
the same id with the same body answers the run it started the first time (idempotent, no
second run), the same id with another body is refused. The delivery id is stored as the
run's idempotency key (`hook:<trigger>:<delivery>`), unique per workflow and so per trigger.

Outbound, why a scan of RunEvent rather than a hook in the engine: the events that matter
(`run.succeeded`, `run.failed`, `run.cancelled`, `node.dead`) are already written in the
same transactions that change the runs, so they are a transactional outbox. `dispatch()`
reads them past a cursor kept in Postgres, writes one WebhookDelivery per subscription and
event (unique, so reading an event twice is harmless) and enqueues an ordinary RQ job per
delivery. A crash anywhere loses nothing: an event not yet read is read next time, a
delivery whose job was lost is enqueued again, a delivery whose worker died mid-send is
retried. Pub/sub (`bus.RUNS_CHANNEL`) or an on_commit hook would lose events on a crash.
The cost is latency: up to one dispatcher interval (a second) after the event.

`dispatch()` runs once a second from `manage.py runwebhooks` (or from the scheduler's
reconcile step); any number may run, the cursor row is locked while it is read.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import json
import logging
import random
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import django_rq
import httpx
from django.conf import settings
from django.db import OperationalError, close_old_connections, connection, transaction
from django.db.models import Max
from django.utils import timezone
from psycopg.errors import LockNotAvailable

from workflows.core import egress
from workflows.core.backoff import backoff_delay
from workflows.handlers import egress as egress_transport
from workflows.runs import tracecontext
from workflows.store import audit, traceids
from workflows.store.errors import Conflict, DomainError, Invalid, NotFound
from workflows.store.models import (
    DeadLetter,
    Run,
    RunEvent,
    Trigger,
    WebhookCursor,
    WebhookDelivery,
    WebhookSubscription,
    Workflow,
)
from workflows.store.statements import DELIVERIES, EVENTS, RUNS, SUBSCRIPTIONS
from workflows.versions.catalog import person_of

log = logging.getLogger(__name__)

APPROVAL_EVENTS = ("approval.requested", "approval.escalated", "approval.decided")  # waits.py writes them
BUDGET_EVENTS = ("budget.threshold", "budget.exhausted")  # workflows/budgets/alerts.py
EVENT_TYPES = (
    "run.succeeded",
    "run.failed",
    "run.cancelled",
    "deadletter.created",
    *APPROVAL_EVENTS,
    *BUDGET_EVENTS,
)
EVENT_OF_KIND = {
    "run.succeeded": "run.succeeded",
    "run.failed": "run.failed",
    "run.cancelled": "run.cancelled",
    "node.dead": "deadletter.created",
    **{kind: kind for kind in APPROVAL_EVENTS},
    **{kind: kind for kind in BUDGET_EVENTS},
}
DELIVERY_JOB = "workflows.integrations.webhooks.deliver"
BATCH = 50  # deliveries a job sends side by side
QUEUE = "default"
CURSOR = "events"
SETTLE_SECONDS = 10  # how late a transaction may commit an event and still be read
CHECKPOINT_EVERY = 1.0
SCAN_LIMIT = 5000
REQUEUE_AFTER = timedelta(minutes=2)  # enqueued but never picked up: enqueue again
MAX_BACKOFF_SECONDS = 3600
WEBHOOK_JITTER = 0.2
RESPONSE_EXCERPT = 1000


class SignatureRefused(DomainError):
    """A delivery's signature or timestamp does not hold (401)."""

    http_status = 401


# --------------------------------------------------------------------------- signing


def new_secret() -> str:
    return f"whsec_{secrets.token_urlsafe(32)}"


def sign(secret: str, timestamp: int | str, delivery_id: str, body: bytes) -> str:
    """Return `sha256=<hex>` over `<timestamp>.<delivery id>.<raw body>`."""
    material = f"{timestamp}.{delivery_id}.".encode() + body
    digest = hmac.new(secret.encode(), material, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def signed_headers(secret: str, delivery_id: str, body: bytes, now: float | None = None) -> dict[str, str]:
    """Return the headers that sign `body`, as a sender puts them on the request."""
    timestamp = int(time.time() if now is None else now)
    return {
        "X-Switchyard-Timestamp": str(timestamp),
        "X-Switchyard-Delivery": delivery_id,
        "X-Switchyard-Signature": sign(secret, timestamp, delivery_id, body),
    }


# --------------------------------------------------------------------------- inbound


def create_trigger(workflow: Workflow, name: str, actor: Any = None, priority: int | None = None) -> Trigger:
    with transaction.atomic():
        trigger = Trigger.objects.create(
            workflow=workflow, name=name, secret=new_secret(), created_by=person_of(actor), priority=priority
        )
        audit.record(actor, "trigger.create", trigger, workflow=workflow.slug, name=name, priority=priority)
    return trigger


def delete_trigger(trigger_id: Any, actor: Any = None) -> None:
    with transaction.atomic():
        trigger = get_trigger(trigger_id)
        audit.record(actor, "trigger.delete", trigger, workflow=trigger.workflow.slug, name=trigger.name)
        trigger.delete()


def rotate_trigger_secret(trigger_id: Any, actor: Any = None) -> Trigger:
    """Give a trigger a new secret (returned once); deliveries signed with the old one are refused."""
    with transaction.atomic():
        trigger = get_trigger(trigger_id)
        trigger.secret = new_secret()
        trigger.save(update_fields=["secret"])
        audit.record(actor, "trigger.rotate", trigger, workflow=trigger.workflow.slug, name=trigger.name)
    return trigger


def get_trigger(trigger_id: Any) -> Trigger:
    try:
        return Trigger.objects.select_related("workflow").get(pk=trigger_id)
    except Trigger.DoesNotExist:
        raise NotFound(f"No trigger with id {trigger_id}.") from None


def verify_delivery(
    trigger_id: Any, timestamp: str, delivery_id: str, signature: str, body: bytes, now: float
) -> Trigger:
    """Return the trigger if the delivery is signed with its secret and fresh; raise otherwise."""
    trigger = get_trigger(trigger_id)
    if not trigger.active:
        raise NotFound(f"Trigger {trigger_id} is disabled.")
    check_signature(trigger.secret, timestamp, delivery_id, signature, body, now, "trigger")
    return trigger


def check_signature(
    secret: str, timestamp: str, delivery_id: str, signature: str, body: bytes, now: float, owner: str
) -> None:
    """Refuse (SignatureRefused) a delivery not signed with `secret` (the `owner`'s: a trigger,
    a topic hook) or signed too long ago or in the future."""
    if not timestamp.isdigit():
        raise SignatureRefused("X-Switchyard-Timestamp: give the signing time in Unix seconds.")
    tolerance = settings.SWITCHYARD["WEBHOOK_TOLERANCE_SECONDS"]
    age = now - int(timestamp)
    if abs(age) > tolerance:
        raise SignatureRefused(
            f"X-Switchyard-Timestamp: the signature is {abs(age):.0f} s {'old' if age > 0 else 'in the future'}; "
            f"the tolerance is {tolerance} s. Sign each delivery when it is sent."
        )
    if not hmac.compare_digest(sign(secret, timestamp, delivery_id, body), signature):
        raise SignatureRefused(
            "X-Switchyard-Signature: does not match; sign timestamp + '.' + delivery id + '.' + the "
            f"raw body with the {owner}'s secret (HMAC-SHA256, hex, prefixed 'sha256=')."
        )


def start_from_delivery(
    trigger: Trigger, delivery_id: str, run_input: Any, traceparent: str | None = None
) -> tuple[Run, bool]:
    """Start the trigger's workflow once per delivery id; return (run, created).

    A W3C `traceparent` makes the run's trace a part of the sender's."""
    if not isinstance(run_input, dict):
        raise Invalid("The body must be a JSON object: it becomes the run input.")
    key = f"hook:{trigger.pk}:{delivery_id}"
    return tracecontext.start_run(
        trigger.workflow, run_input, traceparent, idempotency_key=key, priority=trigger.priority
    )


# --------------------------------------------------------------------------- subscriptions


def create_subscription(
    workflow: Workflow, url: str, events: list[str], actor: Any = None
) -> WebhookSubscription:
    unknown = sorted(set(events) - set(EVENT_TYPES))
    if unknown or not events:
        raise Invalid(f"events: choose from {', '.join(EVENT_TYPES)}; got {events}.")
    problem = url_problem(url)
    if problem:
        raise Invalid(f"url: {problem}")
    refusal = egress.literal_refusal(url, egress_transport.current_policy())
    if refusal is not None:
        raise Invalid(f"url: {refusal}.")
    with transaction.atomic():
        ensure_cursor()  # events from now on are delivered, none from before
        subscription = WebhookSubscription.objects.create(
            workflow=workflow,
            url=url,
            events=sorted(set(events)),
            secret=new_secret(),
            created_by=person_of(actor),
        )
        audit.record(actor, "subscription.create", subscription, workflow=workflow.slug, url=url)
    return subscription


def url_problem(url: str) -> str | None:
    """Say what keeps `url` from being sent to (scheme, host, IDNA labels, port), or None.

    Checked when a subscription is created, so a delivery never meets a URL that cannot be
    sent to: `http://[zz` or a 64-character label made the delivery job raise.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"is not a URL ({exc}); give http(s)://host[:port]/path."
    if parts.scheme not in ("http", "https"):
        return "must start with http:// or https://."
    host = parts.hostname or ""
    if not host:
        return "names no host; give http(s)://host[:port]/path."
    if port == 0:
        return "port must be between 1 and 65535."
    if is_ip_literal(host):
        return None
    try:
        encoded = host.removesuffix(".").encode("idna")
    except UnicodeError:
        return f"host {host[:80]!r} is not a valid host name: each label 1 to 63 characters."
    if any(not label or len(label) > 63 for label in encoded.split(b".")):
        return f"host {host[:80]!r} is not a valid host name: each label 1 to 63 characters."
    return None


def is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def delete_subscription(subscription_id: int, actor: Any = None) -> None:
    with transaction.atomic():
        subscription = get_subscription(subscription_id)
        audit.record(actor, "subscription.delete", subscription, url=subscription.url)
        subscription.delete()


def get_subscription(subscription_id: int) -> WebhookSubscription:
    try:
        return WebhookSubscription.objects.select_related("workflow").get(pk=subscription_id)
    except WebhookSubscription.DoesNotExist:
        raise NotFound(f"No webhook subscription with id {subscription_id}.") from None


def resend_delivery(delivery_id: int, actor: Any = None) -> WebhookDelivery:
    """Send a finished delivery again, now, with a fresh retry budget; the log keeps its row.

    A conditional update from a finished status: a delivery pending or being sent is refused
    (it is going out already), and two clicks resend once.
    """
    with transaction.atomic():
        sent_again = WebhookDelivery.objects.filter(
            pk=delivery_id, status__in=[WebhookDelivery.SUCCEEDED, WebhookDelivery.FAILED]
        ).update(
            status=WebhookDelivery.PENDING,
            attempts=0,
            next_attempt_at=timezone.now(),
            enqueued_at=timezone.now(),
            delivered_at=None,
        )
        delivery = get_delivery(delivery_id)
        if sent_again != 1:
            raise Conflict(
                f"Delivery {delivery_id} is {delivery.status}: only a finished delivery is sent again."
            )
        audit.record(actor, "delivery.resend", delivery, subscription=delivery.subscription_id)
        transaction.on_commit(lambda: enqueue_jobs([delivery_id]))
    return delivery


def get_delivery(delivery_id: int) -> WebhookDelivery:
    try:
        return WebhookDelivery.objects.select_related("subscription__workflow").get(pk=delivery_id)
    except WebhookDelivery.DoesNotExist:
        raise NotFound(f"No webhook delivery with id {delivery_id}.") from None


# --------------------------------------------------------------------------- dispatching


def dispatch(now: datetime | None = None) -> dict[str, int]:
    """Do one round: read new events, retry stuck sends, enqueue what is due."""
    now = now or timezone.now()
    return {"created": scan_events(now), "reclaimed": reclaim_stuck(now), "enqueued": enqueue_due(now)}


def dispatch_round() -> int:
    """Dispatch one round (the scheduler's duty, under the reconciler's lock); return what moved."""
    return sum(dispatch().values())


def ensure_cursor() -> WebhookCursor:
    top = RunEvent.objects.aggregate(top=Max("id"))["top"] or 0
    cursor, _ = WebhookCursor.objects.get_or_create(name=CURSOR, defaults={"checkpoints": [[0.0, top]]})
    return cursor


def locked_cursor() -> WebhookCursor:
    """The cursor row, locked until the transaction ends; made again (from now on) if it was
    deleted, say by a restore or a test emptying the tables, rather than failing the round.

    Never waited for: a scan that still holds it (slow, or its scheduler cut off from
    PostgreSQL mid-scan, until its session ends) raises LockNotAvailable at once; a scheduler
    waiting here would stop deciding and reconciling for as long.
    """
    while (
        cursor := WebhookCursor.objects.select_for_update(nowait=True).filter(name=CURSOR).first()
    ) is None:
        ensure_cursor()
    return cursor


SCAN_SQL = f"""
SELECT e.id, e.kind, e.run_id, e.node_id, e.attempt, e.at, s.id, s.events
FROM {EVENTS} e
JOIN {RUNS} r ON r.id = e.run_id
JOIN {SUBSCRIPTIONS} s
  ON s.workflow_id = r.workflow_id AND s.active AND s.created_at <= e.at
WHERE e.id > %(since)s AND e.id <= %(upper)s AND e.kind = ANY(%(kinds)s)
  AND NOT EXISTS (
    SELECT 1 FROM {DELIVERIES} d WHERE d.subscription_id = s.id AND d.event_id = e.id)
ORDER BY e.id
LIMIT %(limit)s
"""


def scan_events(now: datetime) -> int:
    """Create the deliveries for events written since the last scans; return how many (none
    while another scan holds the cursor: the next round reads what this one would have)."""
    try:
        return scan_locked(now)
    except OperationalError as exc:
        if not isinstance(exc.__cause__, LockNotAvailable):
            raise
        log.warning("webhook scan skipped: another scan still holds the cursor")
        return 0


def scan_locked(now: datetime) -> int:
    with transaction.atomic():
        cursor = locked_cursor()
        upper = RunEvent.objects.aggregate(top=Max("id"))["top"] or 0
        since = scan_start(cursor.checkpoints, now.timestamp())
        rows = []
        if WebhookSubscription.objects.filter(active=True).exists():
            with connection.cursor() as cur:
                cur.execute(
                    SCAN_SQL,
                    {"since": since, "upper": upper, "kinds": list(EVENT_OF_KIND), "limit": SCAN_LIMIT},
                )
                rows = cur.fetchall()
            if len(rows) == SCAN_LIMIT:
                upper = rows[-1][0]  # the rest next round
        deliveries = build_deliveries(rows, now)
        WebhookDelivery.objects.bulk_create(deliveries, ignore_conflicts=True)
        cursor.checkpoints = add_checkpoint(cursor.checkpoints, now.timestamp(), upper)
        cursor.save(update_fields=["checkpoints", "updated_at"])
    return len(deliveries)


def scan_start(checkpoints: list[list[float]], now: float) -> int:
    """Start from the newest checkpoint old enough that every event below it has committed."""
    settled = [int(position) for at, position in checkpoints if now - at >= SETTLE_SECONDS]
    return settled[-1] if settled else int(checkpoints[0][1])


def add_checkpoint(checkpoints: list[list[float]], now: float, upper: int) -> list[list[float]]:
    kept = list(checkpoints)
    settled = [i for i, (at, _) in enumerate(kept) if now - at >= SETTLE_SECONDS]
    if settled:
        kept = kept[settled[-1] :]  # older settled ones are never read again
    if now - kept[-1][0] >= CHECKPOINT_EVERY:
        kept.append([now, upper])
    return kept


def build_deliveries(rows: list[tuple[Any, ...]], now: datetime) -> list[WebhookDelivery]:
    wanted = [row for row in rows if EVENT_OF_KIND[row[1]] in row[7]]
    run_ids = {row[2] for row in wanted}
    run_map = {r.pk: r for r in Run.objects.filter(pk__in=run_ids).select_related("workflow", "version")}
    letters = {
        (d.run_id, d.node_id, d.attempt): d
        for d in DeadLetter.objects.filter(run_id__in={row[2] for row in wanted if row[1] == "node.dead"})
    }
    carried = dict(  # events whose own data the payload carries
        RunEvent.objects.filter(
            pk__in=[row[0] for row in wanted if row[1] in APPROVAL_EVENTS or row[1] in BUDGET_EVENTS]
        ).values_list("id", "data")
    )
    deliveries = []
    for event_id, kind, run_id, node_id, attempt, at, subscription_id, _ in wanted:
        letter = letters.get((run_id, node_id, attempt))
        payload = event_payload(event_id, kind, at, run_map[run_id], letter)
        if kind in BUDGET_EVENTS:
            payload["data"]["budget"] = carried[event_id].get("budget")
        elif event_id in carried:
            approval = carried[event_id]
            payload["data"]["approval"] = {
                **approval,
                "node_id": node_id,
                "url": f"/api/v1/approvals/{approval.get('approval')}",
            }
        deliveries.append(
            WebhookDelivery(
                subscription_id=subscription_id,
                event_id=event_id,
                event_type=EVENT_OF_KIND[kind],
                payload=payload,
                next_attempt_at=now,
            )
        )
    return deliveries


def event_payload(
    event_id: int, kind: str, at: datetime, run: Run, letter: DeadLetter | None
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "run": {
            "id": run.pk,
            "status": run.status,
            "workflow": run.workflow.slug,
            "version": run.version.number,
            "created_at": run.created_at.isoformat(),
            "finished_at": run.finished_at.isoformat() if run.finished_at else None,
            "url": f"/api/v1/runs/{run.pk}",
        }
    }
    if letter is not None:
        data["dead_letter"] = {
            "id": letter.pk,
            "node_id": letter.node_id,
            "attempt": letter.attempt,
            "error": letter.error[:2000],
            "url": f"/api/v1/deadletters/{letter.pk}",
        }
    return {"id": f"evt_{event_id}", "type": EVENT_OF_KIND[kind], "created_at": at.isoformat(), "data": data}


# Statuses spelled out, not parameters: the partial index serves generic plans (pgsession).
RECLAIM_SQL = f"""
UPDATE {DELIVERIES}
SET status = 'pending', next_attempt_at = %(now)s, enqueued_at = NULL, error = 'worker lost during the attempt'
WHERE status = 'sending' AND last_attempt_at < %(lost_before)s
"""


def reclaim_stuck(now: datetime) -> int:
    """Put back deliveries whose worker died mid-send (no outcome long after the timeout)."""
    lost_before = now - timedelta(seconds=settings.SWITCHYARD["WEBHOOK_TIMEOUT_SECONDS"] + 60)
    with connection.cursor() as cur:
        cur.execute(RECLAIM_SQL, {"now": now, "lost_before": lost_before})
        reclaimed: int = cur.rowcount
        return reclaimed


DUE_SQL = f"""
UPDATE {DELIVERIES} SET enqueued_at = %(now)s
WHERE id IN (
    SELECT id FROM {DELIVERIES}
    WHERE status = 'pending' AND next_attempt_at <= %(now)s
      AND (enqueued_at IS NULL OR enqueued_at < %(stale)s)
    ORDER BY next_attempt_at LIMIT 500 FOR UPDATE SKIP LOCKED)
RETURNING id
"""


def enqueue_due(now: datetime) -> int:
    """Enqueue a delivery job for every pending delivery that is due (after commit)."""
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(DUE_SQL, {"now": now, "stale": now - REQUEUE_AFTER})
        due = [row[0] for row in cur.fetchall()]
        transaction.on_commit(lambda: enqueue_jobs(due))
    return len(due)


def enqueue_jobs(delivery_ids: list[int]) -> None:
    """Enqueue the deliveries' jobs, BATCH deliveries to a job."""
    queue = django_rq.get_queue(QUEUE)
    for i in range(0, len(delivery_ids), BATCH):
        queue.enqueue(DELIVERY_JOB, delivery_ids[i : i + BATCH], result_ttl=600, failure_ttl=86400)


# --------------------------------------------------------------------------- delivering
# A job sends its deliveries side by side, on an event loop (httpx's async client, held to the
# egress policy): a receiver that takes its whole timeout holds one job for that long, not one
# worker process per delivery. Each delivery is claimed (pending -> sending) before it is
# sent and its outcome recorded after; one lost with its worker comes back by reclaim_stuck.


def deliver(delivery_ids: list[int] | int) -> dict[str, int]:
    """RQ job entry point: a long-lived worker drops a dead database connection first. (A
    single id: a job enqueued before deliveries were sent in batches.)"""
    close_old_connections()
    counts: dict[str, int] = {}
    ids = [delivery_ids] if isinstance(delivery_ids, int) else delivery_ids
    for status in send_deliveries(ids).values():
        counts[status] = counts.get(status, 0) + 1
    return counts


def send_delivery(delivery_id: int) -> str:
    """Send one delivery once, if it is due; return its status after ("not due": delivered
    already, or another job holds it)."""
    return send_deliveries([delivery_id]).get(delivery_id, "not due")


def send_deliveries(delivery_ids: list[int]) -> dict[int, str]:
    """Send the due ones among these deliveries once, side by side; record each outcome and
    when to try again; return the status of each one sent."""
    claimed = claim(delivery_ids, timezone.now())
    if not claimed:
        return {}
    requests = [request_of(d) for d in claimed]  # read from the database here, not on the loop
    outcomes = asyncio.run(send_all(requests))
    for delivery, outcome in zip(claimed, outcomes, strict=True):
        record(delivery, outcome, timezone.now())
    return {d.pk: d.status for d in claimed}


def claim(delivery_ids: list[int], now: datetime) -> list[WebhookDelivery]:
    """Take the deliveries that are due (pending -> sending, one attempt more)."""
    with connection.cursor() as cur:
        cur.execute(CLAIM_SQL, {"ids": delivery_ids, "now": now})
        taken = [row[0] for row in cur.fetchall()]
    return list(WebhookDelivery.objects.select_related("subscription").filter(pk__in=taken).order_by("pk"))


CLAIM_SQL = f"""
UPDATE {DELIVERIES} SET status = 'sending', attempts = attempts + 1, last_attempt_at = %(now)s
WHERE id = ANY(%(ids)s::bigint[]) AND status = 'pending' AND next_attempt_at <= %(now)s
RETURNING id
"""


@dataclass(frozen=True)
class Request:
    """What a delivery POSTs, built before the loop (the trace parent is read from the database)."""

    url: str
    body: bytes
    headers: dict[str, str]


def request_of(delivery: WebhookDelivery) -> Request | Exception:
    """The delivery's signed request, or what kept it from being built (an outcome, not raised)."""
    try:
        body = json.dumps(delivery.payload, separators=(",", ":"), ensure_ascii=False).encode()
        subscription = delivery.subscription
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "Switchyard-Webhooks/1",
            "X-Switchyard-Event": delivery.event_type,
            **signed_headers(subscription.secret, str(delivery.pk), body),
        }
        run_id = (delivery.payload.get("data") or {}).get("run", {}).get("id")
        if isinstance(run_id, int):  # the receiver's spans join the run's trace
            headers["traceparent"] = traceids.run_traceparent(run_id)
            headers["tracestate"] = traceids.tracestate_of(run_id)
        return Request(subscription.url, body, headers)
    except Exception as exc:  # the attempt's boundary: see send_one
        return exc


def send(delivery: WebhookDelivery) -> dict[str, Any]:
    """POST one delivery's signed payload now (claimed or not); return what happened."""
    (outcome,) = asyncio.run(send_all([request_of(delivery)]))
    return outcome


async def send_all(requests: list[Request | Exception]) -> list[dict[str, Any]]:
    # Checked again at connect time: the URL's name may resolve elsewhere by now.
    timeout = settings.SWITCHYARD["WEBHOOK_TIMEOUT_SECONDS"]
    async with egress_transport.async_client(timeout=timeout) as client:
        return await asyncio.gather(*(send_one(client, r) for r in requests))


async def send_one(client: httpx.AsyncClient, request: Request | Exception) -> dict[str, Any]:
    """POST one request; return what happened (never raises: any failure is an outcome).

    The catch-all is this attempt's boundary: whatever goes wrong building or sending the
    request (an httpx error, a URL that does not encode, a payload that does not serialize)
    is recorded as the attempt's error and retried per the backoff. Raised, it left the
    delivery `sending` until the reclaim, with no error recorded.
    """
    started = time.monotonic()
    try:
        if isinstance(request, Exception):
            raise request
        response = await client.post(request.url, content=request.body, headers=request.headers)
    except Exception as exc:  # the attempt's boundary: see the docstring
        return {
            "status": None,
            "body": "",
            "error": f"{type(exc).__name__}: {exc}"[:RESPONSE_EXCERPT],
            "ms": (time.monotonic() - started) * 1000,
        }
    return {
        "status": response.status_code,
        "body": response.text[:RESPONSE_EXCERPT],
        "error": "" if response.is_success else f"HTTP {response.status_code}",
        "ms": (time.monotonic() - started) * 1000,
    }


def record(delivery: WebhookDelivery, outcome: dict[str, Any], now: datetime) -> None:
    ok = outcome["status"] is not None and 200 <= outcome["status"] < 300
    delivery.response_status, delivery.response_body = outcome["status"], outcome["body"]
    delivery.error, delivery.duration_ms = outcome["error"], outcome["ms"]
    if ok:
        delivery.status, delivery.delivered_at = WebhookDelivery.SUCCEEDED, now
    elif delivery.attempts >= settings.SWITCHYARD["WEBHOOK_MAX_ATTEMPTS"]:
        delivery.status = WebhookDelivery.FAILED
    else:
        delivery.status, delivery.enqueued_at = WebhookDelivery.PENDING, None
        delivery.next_attempt_at = now + timedelta(seconds=backoff(delivery.attempts, random.random()))
    fields = [
        "status",
        "response_status",
        "response_body",
        "error",
        "duration_ms",
        "delivered_at",
        "enqueued_at",
        "next_attempt_at",
    ]
    WebhookDelivery.objects.filter(pk=delivery.pk, status=WebhookDelivery.SENDING).update(
        **{name: getattr(delivery, name) for name in fields}
    )


def backoff(attempts: int, rand: float) -> float:
    """Seconds before the next attempt: exponential from WEBHOOK_BACKOFF_SECONDS, capped, +/-20%."""
    first = settings.SWITCHYARD["WEBHOOK_BACKOFF_SECONDS"]
    return backoff_delay(attempts, rand, first=first, cap=MAX_BACKOFF_SECONDS, jitter=WEBHOOK_JITTER)
