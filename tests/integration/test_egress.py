"""The egress policy end to end: real sockets, a real worker, and a resolver stub for DNS rebinding.

Names are resolved by `workflows.handlers.egress.resolve`, which these tests replace with a
table: no outside network, no /etc/hosts. The session allows 127.0.0.1 (tests/conftest.py);
`default_egress` takes that back for the tests of the refusals.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from django.conf import LazySettings

from tests.integration.conftest import node, publish, wait_finished
from tests.integration.runtime import Runtime
from workflows import handlers
from workflows.core.egress import EgressRefused
from workflows.handlers import builtin, egress as transport
from workflows.integrations import webhooks
from workflows.llm import catalog, client
from workflows.llm.providers import Endpoint
from workflows.runs import actions as runs
from workflows.store.errors import Invalid
from workflows.store.models import NodeRun, WebhookDelivery, WebhookSubscription
from workflows.versions import publish as versions


class Seen(BaseHTTPRequestHandler):
    """Answer 200 with the Host header it got; /redirect?to=URL answers 302 to URL."""

    server: Recorder

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.hosts.append(self.headers.get("Host", ""))
        if self.path.startswith("/redirect?to="):
            self.send_response(302)
            self.send_header("Location", self.path.removeprefix("/redirect?to="))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET


class Recorder(ThreadingHTTPServer):
    daemon_threads = True
    hosts: list[str]


@pytest.fixture
def server() -> Iterator[Recorder]:
    httpd = Recorder(("127.0.0.1", 0), Seen)
    httpd.hosts = []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def port_of(httpd: Recorder) -> int:
    return int(httpd.server_address[1])


Answers = dict[str, list[list[str]]]


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> Answers:
    """A resolver stub: name -> successive answers (the last one repeats)."""
    answers: Answers = {}

    def resolve(host: str, port: int) -> list[str]:
        queue = answers[host]
        return queue.pop(0) if len(queue) > 1 else queue[0]

    monkeypatch.setattr(transport, "resolve", resolve)
    return answers


def allow(settings: LazySettings, *entries: str) -> None:
    settings.SWITCHYARD = {**settings.SWITCHYARD, "EGRESS_ALLOW": list(entries)}


def get(url: str, **options: Any) -> httpx.Response:
    with transport.client(timeout=5, **options) as http:
        return http.get(url)


async def aget(url: str, **options: Any) -> httpx.Response:
    async with transport.async_client(timeout=5, **options) as http:
        return await http.get(url)


Fetch = Callable[..., httpx.Response]


def fetch_async(url: str, **options: Any) -> httpx.Response:
    return asyncio.run(aget(url, **options))


@pytest.fixture(params=["sync", "async"])
def fetch(request: pytest.FixtureRequest) -> Fetch:
    return get if request.param == "sync" else fetch_async


# --- connect time ------------------------------------------------------------------------------


def test_the_transport_connects_to_the_checked_address_and_keeps_the_name_in_host(
    settings: LazySettings, dns: Answers, server: Recorder, fetch: Fetch
) -> None:
    port = port_of(server)
    allow(settings, f"127.0.0.1:{port}")
    dns["api.test"] = [["127.0.0.1"]]
    assert fetch(f"http://api.test:{port}/").json() == {"ok": True}
    assert server.hosts == [f"api.test:{port}"]


def test_a_name_rebound_to_a_refused_address_is_refused_at_the_next_connect(
    settings: LazySettings, dns: Answers, server: Recorder, fetch: Fetch
) -> None:
    port = port_of(server)
    allow(settings, f"127.0.0.1:{port}")
    dns["rebind.test"] = [["127.0.0.1"], ["169.254.169.254"]]
    assert fetch(f"http://rebind.test:{port}/").status_code == 200
    with pytest.raises(
        EgressRefused, match=r"169\.254\.169\.254 \(resolved from rebind\.test\) .*\(rule: metadata\)"
    ):
        fetch(f"http://rebind.test:{port}/")
    assert len(server.hosts) == 1


def test_every_resolved_address_is_checked_not_only_the_first(
    default_egress: None, dns: Answers, fetch: Fetch
) -> None:
    dns["mixed.test"] = [["93.184.216.34", "10.1.2.3"]]
    with pytest.raises(EgressRefused, match=r"10\.1\.2\.3 .*\(rule: private\)"):
        fetch("http://mixed.test/")


def test_a_followed_redirect_to_a_refused_address_is_refused(
    settings: LazySettings, dns: Answers, server: Recorder, fetch: Fetch
) -> None:
    port = port_of(server)
    allow(settings, f"127.0.0.1:{port}")
    dns["api.test"] = [["127.0.0.1"]]
    dns["inside.test"] = [["192.168.0.10"]]
    target = f"http://inside.test:{port}/"
    with pytest.raises(EgressRefused, match=r"192\.168\.0\.10 .*\(rule: private\)"):
        fetch(f"http://api.test:{port}/redirect?to={target}", follow_redirects=True)
    assert server.hosts == [f"api.test:{port}"]


# httpx itself refuses 0177.0.0.1 as a URL; http.request names the rule first (test below).
@pytest.mark.parametrize("host", ["127.0.0.1", "2130706433", "127.1", "[::ffff:127.0.0.1]", "localhost"])
def test_a_local_server_is_refused_by_default_in_every_spelling(
    default_egress: None, server: Recorder, host: str, fetch: Fetch
) -> None:
    with pytest.raises(EgressRefused, match=r"\(rule: loopback\)"):
        fetch(f"http://{host}:{port_of(server)}/")
    assert server.hosts == []


# --- http.request in a real worker ---------------------------------------------------------------


@pytest.mark.parametrize("slots", ["100", "0"])  # on the loop (slots) and the plain handler
def test_http_request_to_a_refused_address_fails_the_node_naming_the_rule(
    transactional_db: Any, redis_clean: None, server: Recorder, slots: str
) -> None:
    config = {"url": "http://{input.host}:{input.port}/", "timeout_seconds": 10}
    workflow = publish("egress-http", {"nodes": [node("fetch", "http.request", config=config)], "edges": []})
    rt = Runtime(SWITCHYARD_EGRESS_ALLOW="", SWITCHYARD_WORKER_SLOTS=slots)
    try:
        rt.worker("w1")
        rt.scheduler("s1")
        rt.wait_ready()
        run = runs.start_run(workflow, {"host": "127.0.0.1", "port": port_of(server)})[0]
        assert wait_finished(run, 60).status == "failed"
    finally:
        rt.stop()
    error = NodeRun.objects.get(run=run, node_id="fetch").error
    assert "egress refused: 127.0.0.1 is a loopback address (rule: loopback)" in error
    assert "SWITCHYARD_EGRESS_ALLOW=127.0.0.1" in error
    assert server.hosts == []


@pytest.mark.parametrize(
    "host", ["0177.0.0.1", "2130706433", "localhost.", "127.1"]
)  # placeholders encode "[" and ":"
def test_http_request_names_the_rule_for_a_rendered_url_in_any_spelling(
    default_egress: None, host: str
) -> None:
    context = builtin_context({"url": "http://{input.host}/"}, {"host": host})
    with pytest.raises(builtin.HandlerError, match=r"egress refused: .* \(rule: loopback\)"):
        builtin.request_url(context, "http.request")


def builtin_context(config: dict[str, Any], run_input: dict[str, Any]) -> handlers.NodeContext:
    return handlers.NodeContext(
        run_id=1,
        node_id="fetch",
        attempt=1,
        idempotency_key="1:fetch:1",
        input=run_input,
        upstream={},
        config=config,
        deadline=time.monotonic() + 30,
    )


def test_http_request_handler_names_the_rule_in_its_error(default_egress: None, dns: Answers) -> None:
    dns["metadata.test"] = [["169.254.169.254"]]
    with pytest.raises(
        builtin.HandlerError, match=r"http\.request: GET http://metadata\.test/: egress refused.*metadata"
    ):
        builtin.send(
            "GET",
            "http://metadata.test/",
            headers=httpx.Headers(),
            body={},
            timeout=5,
            max_bytes=100,
            where="http.request",
        )


# --- save time ------------------------------------------------------------------------------------


def test_publishing_a_definition_naming_a_refused_address_is_refused_naming_the_field(
    default_egress: None, db: None
) -> None:
    definition = {
        "nodes": [node("fetch", "http.request", config={"url": "http://169.254.169.254/latest/meta-data/"})],
        "edges": [],
    }
    with pytest.raises(Invalid) as refused:
        versions.parse(definition)
    problems = [(i.path, i.code, i.node) for i in refused.value.issues]
    assert problems == [("nodes[0].config.url", "egress_refused", "fetch")]
    assert "(rule: metadata)" in refused.value.issues[0].message


# --- webhooks and providers -----------------------------------------------------------------------


def test_a_webhook_subscription_to_a_refused_address_is_refused_naming_url(
    default_egress: None, db: None
) -> None:
    workflow = publish("egress-hook", {"nodes": [node("a")], "edges": []})
    with pytest.raises(
        Invalid, match=r"^url: egress refused: 10\.0\.0\.7 is a private address \(rule: private\)"
    ):
        webhooks.create_subscription(workflow, "http://10.0.0.7/hook", ["run.succeeded"])


def test_a_webhook_delivery_to_a_name_resolving_to_loopback_records_the_refusal(
    default_egress: None, dns: Answers, server: Recorder
) -> None:
    dns["hooks.test"] = [["127.0.0.1"]]
    subscription = WebhookSubscription(url=f"http://hooks.test:{port_of(server)}/hook", secret="whsec_x")
    delivery = WebhookDelivery(pk=1, subscription=subscription, event_type="run.succeeded", payload={})
    outcome = webhooks.send(delivery)
    assert outcome["status"] is None
    assert (
        "egress refused: 127.0.0.1 (resolved from hooks.test) is a loopback address (rule: loopback)"
        in outcome["error"]
    )
    assert server.hosts == []


def test_a_provider_with_a_refused_base_url_is_refused_naming_base_url(
    default_egress: None, db: None
) -> None:
    change = catalog.ProviderChange(name="inside", base_url="http://[::ffff:a9fe:a9fe]/v1", default_model="m")
    with pytest.raises(Invalid, match=r"^base_url: egress refused: 169\.254\.169\.254 .*\(rule: metadata\)"):
        catalog.save_provider(change)


def test_an_llm_call_to_a_provider_resolving_to_a_private_address_fails_naming_the_rule(
    default_egress: None, dns: Answers
) -> None:
    dns["llm.test"] = [["172.16.0.9"]]
    endpoint = Endpoint("inside", "http://llm.test/v1", "sk-secret", "m", 5.0, False)
    messages = [{"role": "user", "content": "hi"}]
    call = {"idempotency_key": "1:a:1", "timeout_seconds": 5.0, "where": "llm.chat node 'a'"}
    with pytest.raises(
        client.CallFailed, match=r"provider 'inside'.*egress refused: 172\.16\.0\.9 .*\(rule: private\)"
    ):
        client.complete(endpoint, messages, **call)
    with pytest.raises(client.CallFailed, match=r"\(rule: private\)"):
        asyncio.run(client.acomplete(endpoint, messages, **call))
