"""Webhooks: signed inbound triggers (valid, wrong, stale, replayed) and outbound deliveries."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import django_rq
import pytest
from django.db import connection, transaction
from django.utils import timezone

from tests.api.conftest import Api, assert_problem, dead_letter
from tests.integration.conftest import wait_finished
from tests.integration.runtime import wait_for
from workflows.budgets import alerts, manage
from workflows.core import budgets as budgets_core
from workflows.integrations import webhooks
from workflows.runs import actions as runs
from workflows.runtime import advancing
from workflows.runtime.admission import Call
from workflows.runtime.transitions_runs import FinishRun
from workflows.store import traceids
from workflows.store.models import (
    AuditEntry,
    NodeRun,
    Run,
    RunEvent,
    WebhookCursor,
    WebhookDelivery,
    WebhookSubscription,
)

pytestmark = pytest.mark.django_db


def signed(secret: str, body: bytes, delivery: str = "d-1", at: float | None = None) -> dict[str, str]:
    timestamp = str(int(time.time() if at is None else at))
    material = f"{timestamp}.{delivery}.".encode() + body
    digest = hmac.new(secret.encode(), material, hashlib.sha256).hexdigest()
    return {
        "X-Switchyard-Timestamp": timestamp,
        "X-Switchyard-Delivery": delivery,
        "X-Switchyard-Signature": f"sha256={digest}",
    }


@pytest.fixture
def trigger(api, chain) -> dict[str, Any]:
    response = api.post("workflows/chain/triggers", {"name": "crm"})
    assert response.status_code == 201
    return response.json()


def send(trigger: dict[str, Any], body: bytes, headers: dict[str, str]) -> Any:
    return Api(None).post(trigger["url"], raw=body, headers=headers)


def test_a_trigger_shows_its_secret_once(api, trigger) -> None:
    assert trigger["secret"].startswith("whsec_") and trigger["url"] == f"/api/v1/hooks/{trigger['id']}"
    listed = api.get("workflows/chain/triggers").json()["items"]
    assert [t["id"] for t in listed] == [trigger["id"]] and "secret" not in listed[0]
    assert AuditEntry.objects.filter(action="trigger.create").exists()


def test_a_signed_delivery_starts_one_run_and_a_resend_returns_it(trigger) -> None:
    body = b'{"customer": "c-1"}'
    first = send(trigger, body, signed(trigger["secret"], body))
    assert first.status_code == 201
    run = Run.objects.get(pk=first.json()["id"])
    assert run.input == {"customer": "c-1"} and run.idempotency_key == f"hook:{trigger['id']}:d-1"
    again = send(trigger, body, signed(trigger["secret"], body))  # re-signed a moment later, same id
    assert (
        again.status_code == 200 and again.json()["id"] == run.pk and again["Idempotent-Replayed"] == "true"
    )
    other = b'{"customer": "c-2"}'
    assert_problem(send(trigger, other, signed(trigger["secret"], other)), 409)
    assert Run.objects.count() == 1


def test_a_wrong_signature_is_401_and_starts_nothing(trigger) -> None:
    body = b'{"a": 1}'
    headers = signed("whsec_not-the-secret", body)
    body_error = assert_problem(send(trigger, body, headers), 401)
    assert "Signature" in body_error["detail"]
    tampered = signed(trigger["secret"], body)
    assert_problem(send(trigger, b'{"a": 2}', tampered), 401)
    assert not Run.objects.exists()


@pytest.mark.parametrize("skew", [-301, 400, -3600])
def test_a_stale_or_future_timestamp_is_refused(trigger, skew) -> None:
    body = b"{}"
    response = send(trigger, body, signed(trigger["secret"], body, at=time.time() + skew))
    assert "tolerance is 300 s" in assert_problem(response, 401)["detail"]
    assert not Run.objects.exists()


def test_missing_or_malformed_signature_headers_are_400(trigger) -> None:
    body = b"{}"
    headers = signed(trigger["secret"], body)
    for name in headers:
        partial = {k: v for k, v in headers.items() if k != name}
        assert_problem(send(trigger, body, partial), 400, name)
    assert_problem(
        send(trigger, body, {**headers, "X-Switchyard-Signature": "md5=abc"}), 400, "X-Switchyard-Signature"
    )


def test_a_signed_body_that_is_not_a_json_object_is_refused(trigger) -> None:
    for body, status in ((b"[1, 2]", 422), (b"{nope", 400)):
        assert_problem(send(trigger, body, signed(trigger["secret"], body)), status)


def test_an_unknown_or_deleted_trigger_is_404(api, trigger) -> None:
    body = b"{}"
    assert api.delete(f"triggers/{trigger['id']}").status_code == 204
    assert_problem(send(trigger, body, signed(trigger["secret"], body)), 404)
    assert_problem(Api(None).post("hooks/not-a-uuid", raw=body), 404)


def test_inbound_deliveries_are_rate_limited_per_trigger(settings, trigger) -> None:
    settings.SWITCHYARD = {**settings.SWITCHYARD, "API_RATE_LIMIT_PER_MINUTE": 2}
    body = b"{}"
    codes = [send(trigger, body, signed(trigger["secret"], body, f"d-{n}")).status_code for n in range(3)]
    assert codes == [201, 201, 429]


def test_a_captured_delivery_replayed_under_a_new_id_is_refused(trigger) -> None:
    body = b'{"customer": "c-1"}'
    captured = signed(trigger["secret"], body, "delivery-1")
    assert send(trigger, body, captured).status_code == 201
    for new_id in ("delivery-2-replayed", "delivery-3-replayed"):
        replayed = {**captured, "X-Switchyard-Delivery": new_id}
        assert "does not match" in assert_problem(send(trigger, body, replayed), 401)["detail"]
    assert Run.objects.count() == 1


def test_unsigned_requests_do_not_use_up_a_triggers_rate_limit(settings, trigger) -> None:
    settings.SWITCHYARD = {**settings.SWITCHYARD, "API_RATE_LIMIT_PER_MINUTE": 2}
    body = b"{}"
    forged = {**signed(trigger["secret"], body), "X-Switchyard-Signature": "sha256=" + "0" * 64}
    assert [send(trigger, body, forged).status_code for _ in range(5)] == [401] * 5
    assert send(trigger, body, signed(trigger["secret"], body, "d-real")).status_code == 201


# --------------------------------------------------------------------------- outbound


class Receiver:
    """A local HTTP server that records webhook deliveries and answers `status`."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.status = 200
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server protocol
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(receiver.status)
                self.end_headers()
                self.wfile.write(b"thanks")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def subscription(api, chain, receiver) -> dict[str, Any]:
    events = ["run.succeeded", "run.failed", "deadletter.created"]
    response = api.post("workflows/chain/subscriptions", {"url": receiver.url, "events": events})
    assert response.status_code == 201
    return response.json()


def finish(run: Run, status: str = "succeeded") -> None:
    """Finish a run the way the scheduler does (its RunEvent is what webhooks read)."""
    advancing.apply_finishes([FinishRun(run.pk, run.epoch, status)])


def test_a_subscription_shows_its_secret_once(api, subscription) -> None:
    assert subscription["secret"].startswith("whsec_")
    assert "secret" not in api.get(f"subscriptions/{subscription['id']}").json()
    assert_problem(
        api.post("workflows/chain/subscriptions", {"url": "ftp://x", "events": ["run.failed"]}), 422, "url"
    )
    assert_problem(
        api.post("workflows/chain/subscriptions", {"url": "http://x", "events": ["run.lost"]}),
        422,
        "events[0]",
    )


def test_finished_runs_and_dead_letters_are_delivered_signed(chain, subscription, receiver) -> None:
    ok, _ = runs.start_run(chain, {})
    runs.start_run(chain, {"other": "workflow events are not delivered"})
    finish(ok)
    dead = dead_letter(chain)
    assert webhooks.scan_events(timezone.now()) == 2
    assert webhooks.scan_events(timezone.now()) == 0  # read twice, delivered once
    for delivery in WebhookDelivery.objects.order_by("id"):
        assert webhooks.send_delivery(delivery.pk) == "succeeded"
    (h1, b1), (h2, b2) = receiver.requests
    assert json.loads(b1)["type"] == "run.succeeded" and json.loads(b1)["data"]["run"]["id"] == ok.pk
    assert (
        json.loads(b2)["type"] == "deadletter.created"
        and json.loads(b2)["data"]["dead_letter"]["node_id"] == "first"
    )
    assert json.loads(b2)["data"]["run"]["id"] == dead.pk
    for headers, body in receiver.requests:
        stamp, delivery_id = headers["x-switchyard-timestamp"], headers["x-switchyard-delivery"]
        expected = webhooks.sign(subscription["secret"], stamp, delivery_id, body)
        assert headers["x-switchyard-signature"] == expected
        assert headers["x-switchyard-delivery"].isdigit() and headers["x-switchyard-event"]
    # The receiver's spans join the run's trace, under the run's span.
    assert h1["traceparent"] == f"00-{traceids.trace_id(ok.pk):032x}-{traceids.run_span_id(ok.pk):016x}-01"
    assert (
        h2["traceparent"] == f"00-{traceids.trace_id(dead.pk):032x}-{traceids.run_span_id(dead.pk):016x}-01"
    )
    assert (h1["tracestate"], h2["tracestate"]) == (f"switchyard=r:{ok.pk}", f"switchyard=r:{dead.pk}")


def test_a_failing_endpoint_is_retried_with_backoff_then_given_up(
    settings, chain, subscription, receiver
) -> None:
    settings.SWITCHYARD = {**settings.SWITCHYARD, "WEBHOOK_MAX_ATTEMPTS": 2, "WEBHOOK_BACKOFF_SECONDS": 30}
    receiver.status = 503
    run, _ = runs.start_run(chain, {})
    finish(run, "failed")
    webhooks.scan_events(timezone.now())
    delivery = WebhookDelivery.objects.get()
    webhooks.send_delivery(delivery.pk)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_status) == ("pending", 1, 503)
    assert timedelta(seconds=23) <= delivery.next_attempt_at - timezone.now() <= timedelta(seconds=37)
    assert webhooks.send_delivery(delivery.pk) == "not due"
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
    webhooks.send_delivery(delivery.pk)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.error) == ("failed", 2, "HTTP 503")
    assert len(receiver.requests) == 2


def test_an_unreachable_endpoint_is_logged_as_an_error(chain, subscription, receiver) -> None:
    receiver.close()
    run, _ = runs.start_run(chain, {})
    finish(run)
    webhooks.scan_events(timezone.now())
    delivery = WebhookDelivery.objects.get()
    webhooks.send_delivery(delivery.pk)
    delivery.refresh_from_db()
    assert (
        delivery.status == "pending" and "ConnectError" in delivery.error and delivery.response_status is None
    )


@pytest.mark.parametrize(
    "url", ["http://[zz", f"http://{'a' * 64}.example.com/hook", "https://example.com:70000/", "http:///x"]
)
def test_a_subscription_url_that_cannot_be_sent_to_is_refused(api, chain, url) -> None:
    response = api.post("workflows/chain/subscriptions", {"url": url, "events": ["run.failed"]})
    assert_problem(response, 422, "url")
    assert not WebhookSubscription.objects.exists()


def test_a_delivery_that_raises_while_sending_is_recorded_and_retried(
    settings, chain, subscription, receiver
) -> None:
    settings.SWITCHYARD = {**settings.SWITCHYARD, "WEBHOOK_MAX_ATTEMPTS": 2}
    # A URL stored before create-time validation existed: building the request raises UnicodeError.
    WebhookSubscription.objects.update(url=f"http://{'a' * 64}.example.com/hook")
    run, _ = runs.start_run(chain, {})
    finish(run, "failed")
    webhooks.scan_events(timezone.now())
    delivery = WebhookDelivery.objects.get()
    assert webhooks.send_delivery(delivery.pk) == "pending"
    delivery.refresh_from_db()
    assert delivery.attempts == 1 and delivery.error.startswith("UnicodeError: ")
    assert delivery.next_attempt_at > timezone.now() and delivery.response_status is None
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
    assert webhooks.send_delivery(delivery.pk) == "failed"
    assert not receiver.requests


def test_an_event_committed_late_is_still_delivered(chain, subscription) -> None:
    run, _ = runs.start_run(chain, {})
    finish(run)
    late = RunEvent.objects.get(run=run, kind="run.succeeded")
    # Pretend its transaction committed after a scan had read past it: only a scan
    # started within SETTLE_SECONDS of that scan goes back far enough to see it.
    RunEvent.objects.filter(pk=late.pk).update(kind="run.pending-commit")
    now = timezone.now()
    assert webhooks.scan_events(now) == 0
    RunEvent.objects.filter(pk=late.pk).update(kind="run.succeeded")
    assert webhooks.scan_events(now + timedelta(seconds=2)) == 1


@pytest.mark.django_db(transaction=True)
def test_a_scan_skips_its_round_while_another_holds_the_cursor(chain, subscription, caplog) -> None:
    """Another transaction holds the cursor row (a scheduler cut off from PostgreSQL mid-scan
    kept it until its session ended): the scan returns at once instead of waiting on the lock,
    which stopped the waiting scheduler's loop, reconciler included; the next round delivers."""
    run, _ = runs.start_run(chain, {})
    finish(run)
    webhooks.ensure_cursor()
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                WebhookCursor.objects.select_for_update().get(name=webhooks.CURSOR)
                holding.set()
                release.wait(30)
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(30)
        with caplog.at_level("WARNING", logger="workflows.integrations.webhooks"):
            assert webhooks.scan_events(timezone.now() + timedelta(seconds=60)) == 0
        assert "another scan still holds the cursor" in caplog.text
        assert not WebhookDelivery.objects.exists()
    finally:
        release.set()
        holder.join(30)
    assert webhooks.scan_events(timezone.now() + timedelta(seconds=60)) == 1


def test_a_deleted_cursor_row_is_made_again(chain, subscription) -> None:
    """A restore or a test emptying the tables deletes the cursor: the scan makes it again
    (from now on) rather than failing the round."""
    webhooks.ensure_cursor()
    WebhookCursor.objects.all().delete()
    assert webhooks.scan_events(timezone.now()) == 0
    assert WebhookCursor.objects.filter(name=webhooks.CURSOR).count() == 1


def test_events_before_the_subscription_are_not_delivered(api, chain, receiver) -> None:
    run, _ = runs.start_run(chain, {})
    finish(run)
    api.post("workflows/chain/subscriptions", {"url": receiver.url, "events": ["run.succeeded"]})
    assert webhooks.scan_events(timezone.now() + timedelta(seconds=60)) == 0


def test_due_deliveries_are_enqueued_once_and_stuck_sends_come_back(chain, subscription) -> None:
    run, _ = runs.start_run(chain, {})
    finish(run)
    now = timezone.now()
    counts = webhooks.dispatch(now)
    assert counts == {"created": 1, "reclaimed": 0, "enqueued": 1}
    assert webhooks.dispatch(now)["enqueued"] == 0
    WebhookDelivery.objects.update(status="sending", last_attempt_at=now - timedelta(minutes=5))
    assert webhooks.dispatch(now)["reclaimed"] == 1


def test_the_delivery_log_is_readable(api, chain, subscription) -> None:
    run, _ = runs.start_run(chain, {})
    finish(run)
    webhooks.scan_events(timezone.now())
    webhooks.send_delivery(WebhookDelivery.objects.get().pk)
    log = api.get(f"subscriptions/{subscription['id']}/deliveries").json()["items"]
    assert [(d["event_type"], d["status"], d["response_status"]) for d in log] == [
        ("run.succeeded", "succeeded", 200)
    ]
    assert api.get(f"subscriptions/{subscription['id']}/deliveries", status="failed").json()["items"] == []
    assert api.delete(f"subscriptions/{subscription['id']}").status_code == 204
    assert_problem(api.get(f"subscriptions/{subscription['id']}"), 404)


def test_a_real_worker_delivers_a_real_run(runtime, chain, subscription, receiver) -> None:
    """End to end: scheduler and workers run the workflow; a worker sends the webhook (an RQ job)."""
    run, _ = runs.start_run(chain, {})
    assert wait_finished(run).status == "succeeded"
    webhooks.dispatch()
    wait_for(lambda: receiver.requests, 20, "the webhook delivery")
    assert json.loads(receiver.requests[0][1])["data"]["run"]["id"] == run.pk
    wait_for(lambda: WebhookDelivery.objects.filter(status="succeeded").exists(), 10, "the delivery log")


def test_budget_alerts_are_delivered_with_their_budget(api, chain, receiver) -> None:
    response = api.post(
        "workflows/chain/subscriptions",
        {"url": receiver.url, "events": ["budget.threshold", "budget.exhausted"]},
    )
    assert response.status_code == 201
    budget = manage.save_budget(
        {
            "name": "chain tokens",
            "unit": "tokens",
            "amount": 100,
            "window": "day",
            "scope": "workflow",
            "workflow": "chain",
        }
    )
    run, _ = runs.start_run(chain, {})
    node = NodeRun.objects.filter(run=run).first()
    assert node is not None
    call = Call(node.pk, run.pk, node.node_id, 1, "", "m", [], None, 10)
    period = budgets_core.period_of("day", run.pk, timezone.now())
    worst = Decimal(150)  # a call's worst case that the 100 tokens cannot hold
    assert alerts.refused(call, budget, period, "", worst)
    assert not alerts.refused(call, budget, period, "", worst), "once per window"
    finish(run)  # run.succeeded: not subscribed to

    assert webhooks.scan_events(timezone.now()) == 1
    delivery = WebhookDelivery.objects.get()
    assert webhooks.send_delivery(delivery.pk) == "succeeded"
    ((_, body),) = receiver.requests
    sent = json.loads(body)
    assert sent["type"] == "budget.exhausted" and sent["data"]["run"]["id"] == run.pk
    assert sent["data"]["budget"]["name"] == "chain tokens" and sent["data"]["budget"]["amount"] == "100"


def test_a_job_sends_its_deliveries_side_by_side(api, chain) -> None:
    """Five deliveries to a receiver that answers none until all five are in: sent one after
    another, the first would wait out the barrier and fail."""
    barrier = threading.Barrier(5, timeout=15)
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server protocol
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(self.headers["X-Switchyard-Delivery"])
            try:
                barrier.wait()
                self.send_response(200)
            except threading.BrokenBarrierError:
                self.send_response(500)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/hook"
        assert (
            api.post("workflows/chain/subscriptions", {"url": url, "events": ["run.succeeded"]}).status_code
            == 201
        )
        for _ in range(5):
            finish(runs.start_run(chain, {})[0])
        assert webhooks.scan_events(timezone.now()) == 5
        ids = list(WebhookDelivery.objects.order_by("pk").values_list("pk", flat=True))

        assert webhooks.send_deliveries(ids) == dict.fromkeys(ids, "succeeded")
        assert sorted(seen) == sorted(str(i) for i in ids)
        assert webhooks.send_deliveries(ids) == {}  # delivered: none is due again
    finally:
        server.shutdown()
        server.server_close()


def test_due_deliveries_are_enqueued_in_batches(
    chain, subscription, django_capture_on_commit_callbacks
) -> None:
    for _ in range(webhooks.BATCH + 1):
        finish(runs.start_run(chain, {})[0])
    webhooks.scan_events(timezone.now())
    queue = django_rq.get_queue(webhooks.QUEUE)
    queue.empty()
    with django_capture_on_commit_callbacks(execute=True):
        assert webhooks.dispatch(timezone.now())["enqueued"] == webhooks.BATCH + 1
    jobs = [queue.fetch_job(job_id) for job_id in queue.job_ids]
    assert sorted(len(job.args[0]) for job in jobs) == [1, webhooks.BATCH]
