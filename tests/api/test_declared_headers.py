"""Every answer carries the headers the OpenAPI document declares for its status, and no others.

The walk sends, for every operation of the served document, the requests that reach its
answers: the one meant to succeed (against a small world: a published workflow and a draft,
a dead letter, a waiting approval, a spare key, a trigger, a subscription, a provider, a
price, a schedule), then without a key (401), with a key whose scope or role falls short
(403), with a key over its rate limit (429), with a method the path does not serve (405),
with ids that name nothing (404), with a body that is not JSON (400), not sent as JSON (415),
too large (413) or invalid (422), with a query parameter or header of the wrong type (400),
and from a signed-in person's browser session without its CSRF token (403 on unsafe methods).
The starts that take an Idempotency-Key (a run, a signed delivery) are sent twice, so their
replay (200) is walked too. Requests go through Django's test client against the session's real PostgreSQL and Redis,
with the rate limit on (its default).

Each answer is compared with the document: its status must be declared, and its headers
must be those declared for that status. The test fails listing every mismatch as
`operationId status: header ...`. Headers that every HTTP answer carries whatever the
operation (TRANSPORT: the body's framing, Django's security middleware) are not the
document's business and are left out of the comparison.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from controlplane import access
from tests.api.conftest import Api, dead_letter
from tests.api.test_approvals import waiting_run
from tests.api.test_outages import dead_port
from tests.api.test_suites import finished_run
from tests.api.test_webhooks import signed
from workflows.api.api import document
from workflows.core.cloudevents import from_structured
from workflows.events import publishing, subscriptions
from workflows.integrations import keys
from workflows.runtime import bus
from workflows.store.models import DeadLetter, Workflow

pytestmark = pytest.mark.django_db

TRANSPORT = {
    "content-type",  # said by the answer's `content` (OpenAPI ignores a Content-Type header)
    "content-length",
    "vary",
    "x-frame-options",
    "x-content-type-options",
    "referrer-policy",
    "cross-origin-opener-policy",
    # Site-wide security headers set by middleware on every answer (controlplane/csp.py,
    # Django's SecurityMiddleware in production): part of no operation's contract.
    "content-security-policy",
    "strict-transport-security",
}
BODY_LIMIT = 20_000  # DATA_UPLOAD_MAX_MEMORY_SIZE for the walk, so a 413 needs no megabytes
MISSING = {"slug": "no-such-workflow", "node_id": "no_such_node", "name": "no-such", "model": "no-such"}
REPLAYED = {"start_run", "receive"}  # sent twice: the second answer is the replay
# Operations whose walked request is refused, by design of the world: the dead letter's run
# has failed (cancel, rerun: 409), its letter was replayed first (discard: 409), its attempt
# was never recorded (404), the link's token is not signed (403), the workflow has runs (409).
REFUSED_ON_PURPOSE = {
    "cancel_run",
    "rerun",
    "discard_letter",
    "get_attempt",
    "decide_by_link",
    "delete_workflow",
    "allow_hold",  # the world holds no call over a budget: its 404 is what is walked
}

DRAFT = {
    "nodes": [{"id": "first", "handler": "core.noop"}, {"id": "second", "handler": "core.noop"}],
    "edges": [{"source": "first", "target": "second"}],
}
PRICE = {"input_per_million": 1.5, "output_per_million": 6}
PROVIDER = {"name": "acme", "base_url": "https://llm.acme.test/v1", "default_model": "acme-large"}
BUDGET = {"name": "walked", "unit": "tokens", "amount": 1_000_000, "window": "day", "scope": "global"}
BODIES: dict[str, Any] = {
    "create_workflow": {"slug": "walked", "title": "Walked"},
    "update_workflow": {"title": "Chain, renamed"},
    "import_workflow": {
        "format": "switchyard.workflow/v1",
        "slug": "imported",
        "title": "Imported",
        "definition": DRAFT,
    },
    "create_version": {"definition": DRAFT},
    "update_version": {"definition": DRAFT},
    "validate": {"definition": DRAFT},
    "check_definition": {"definition": DRAFT},
    "start_run": {"input": {"n": 1}},
    "start_test_run": {"input": {"n": 1}},
    "start_runs": {"items": [{"input": {"n": 1}}]},
    "replay_many": {"dry_run": True},
    "discard_many": {"dry_run": True, "reason": "walked"},
    "discard_letter": {"reason": "walked"},
    "rerun": {"node_id": "first"},
    "fork_run": {"node_id": "first"},
    "create_key": {"name": "walked", "scopes": ["read"]},
    "create_trigger": {"name": "walked"},
    "create_subscription": {"url": "https://hooks.example.test/in", "events": ["run.failed"]},
    "decide_approval": {"decision": "approve", "fields": {"reason": "walked"}},
    "make_decision_link": {"decision": "reject"},
    "decide_by_link": {"token": "not-a-signed-token"},
    "post_event": {"key": "order-1", "payload": {}},
    "create_provider": {**PROVIDER, "name": "walked"},
    "update_provider": PROVIDER,
    "set_price": PRICE,
    "set_provider_price": PRICE,
    "create_schedule": {"name": "walked", "cron": "0 9 * * 1-5", "timezone": "Europe/Berlin"},
    "update_schedule": {"cron": "0 10 * * 1-5"},
    "create_budget": BUDGET,
    "update_budget": {**BUDGET, "name": "world", "amount": 2_000_000},
    "set_secret": {"value": "walked"},
    "set_mcp_server": {"transport": "http", "url": "http://127.0.0.1:9/mcp", "timeout_seconds": 2},
    "subscribe_to_topic": {"filter": "output.n > 0"},
    "create_topic_hook": {"name": "walked"},
    "create_suite": {"name": "walked", "cases": [{"input": {"n": 1}}]},
    "update_suite": {"required_to_publish": False},
    "add_cases": {"cases": [{"input": {"n": 2}}]},
    "add_cases_from_runs": {"last": 5},
    "upload_cases": {"jsonl": '{"input": {"n": 3}}'},
    "start_suite_run": {},
    "test_recent_runs": {"last": 5, "version": 1},
    "force_breaker": {"model": "acme-large", "state": "open", "seconds": 60, "reason": "walked"},
    "save_provider_limits": {"rpm_limit": 600, "tpm_limit": None, "breaker_failures": 5},
}


def operations() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in document()["paths"].items():
        for method, op in item.items():
            yield method.upper(), path, op


def url_of(path: str, values: dict[str, Any]) -> str:
    for name, value in values.items():
        path = path.replace(f"{{{name}}}", str(value))
    return path


def missing_values(op: dict[str, Any]) -> dict[str, Any]:
    """Path values that name nothing, but pass the path's own checks."""
    values: dict[str, Any] = {}
    for param in op["parameters"]:
        if param["in"] == "path":
            name, schema = param["name"], param["schema"]
            if schema.get("format") == "uuid":
                values[name] = uuid.uuid4()
            elif schema.get("type") == "integer":
                values[name] = min(schema.get("maximum", 999_999), 999_999)
            else:
                values[name] = MISSING.get(name, "no-such")
    return values


def bad_parameter(op: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]] | None:
    """A query parameter or header of the wrong type: (query, headers), or None when there is none."""
    for param in op["parameters"]:
        where, name, schema = param["in"], param["name"], param["schema"]
        value = "x" * 20_000 if schema.get("type") == "string" and "enum" not in schema else "-1.5x"
        if where == "query":
            return {name: value}, {}
        if where == "header":
            return {}, {name: "\x7f" if schema.get("type") == "string" else value}
    return None


@pytest.fixture
def walk(
    settings: Any, person: Callable[[str], Any], chain: Workflow, key_for: Callable[..., str]
) -> dict[str, Any]:
    """The world the walk runs in, and the keys it sends."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = BODY_LIMIT
    admin = Api(key_for())
    run = dead_letter(chain)
    letter = DeadLetter.objects.get(run=run)
    _, wait = waiting_run()
    spare, _ = keys.create_key(person(access.ADMIN), "spare", ("read",))
    draft = admin.post("workflows/chain/versions", {"definition": DRAFT}).json()
    trigger = admin.post("workflows/chain/triggers", {"name": "crm"}).json()
    subscription = admin.post(
        "workflows/chain/subscriptions", {"url": "https://hooks.example.test/x", "events": ["run.failed"]}
    ).json()
    assert admin.post("llm/providers", PROVIDER).status_code == 201
    assert admin.put("llm/prices/acme-large", PRICE).status_code == 200
    assert admin.put("llm/providers/acme/prices/acme-large", PRICE).status_code == 200
    schedule = admin.post(
        "workflows/chain/schedules", {**BODIES["create_schedule"], "name": "mornings"}
    ).json()
    budget = admin.post("budgets", {**BUDGET, "name": "world"}).json()
    finished_run(chain, 1)  # a succeeded run for the suites built from runs
    suite = admin.post("workflows/chain/suites", {"name": "world", "cases": [{"input": {"n": 1}}]}).json()
    suite_run = admin.post(f"suites/{suite['id']}/runs", {}).json()
    assert admin.put("mcp-servers/walked-mcp", BODIES["set_mcp_server"]).status_code == 200
    topic_subscription = subscriptions.subscribe(chain, "walked.topic")
    event = {"specversion": "1.0", "id": "e-1", "source": "/walk", "type": "walked.topic", "data": {}}
    (published,) = publishing.publish_events([("walked.topic", from_structured(event))])
    topic_hook = admin.post("topics/walked.topic/hooks", {"name": "crm"}).json()
    alive()
    over, over_plain = keys.create_key(person(access.ADMIN), "over", ("admin",))
    window = int(time.time() // 60)
    for w in (window, window + 1):  # the walk may cross a minute
        bus.client().set(f"sy:rate:key:{over.prefix}:{w}", 10**6, ex=180)
    return {
        "admin": admin,
        "person": person(access.ADMIN),
        "short": Api(key_for(access.VIEWER, ("read",))),
        "over": Api(over_plain),
        "trigger": trigger,
        "topic_hook": topic_hook,
        "topic_subscription": topic_subscription.pk,
        "etag": draft["etag"],
        "values": {
            "slug": "chain",
            "number": draft["number"],
            "run_id": run.pk,
            "other_id": run.pk,
            "node_id": "first",
            "attempt": 1,
            "letter_id": letter.pk,
            "key_id": spare.pk,
            "trigger_id": trigger["id"],
            "hook_id": topic_hook["id"],
            "subscription_id": subscription["id"],
            "approval_id": wait.pk,
            "name": "acme",
            "model": "acme-large",
            "schedule_id": schedule["id"],
            "id": budget["id"],  # a budget's (and, naming no hold, allow_hold's)
            "topic": "walked.topic",
            "event_id": published.row_id,
            "suite_id": suite["id"],
            "suite_run_id": suite_run["id"],
            "server": "walked-mcp",
        },
    }


def alive() -> None:
    """A scheduler's and a worker's heartbeat, fresh, so that readiness answers 200 as well as 503."""
    bus.heartbeat(bus.scheduler_key("walk"), 600)
    bus.beat_worker("walk", 600, {})


def meant_to_succeed(method: str, path: str, op: dict[str, Any], walk: dict[str, Any]) -> Any:
    op_id = op["operationId"]
    if op_id == "ready":
        alive()  # a worker's beat is old after WORKER_LOST_AFTER_SECONDS, less than a slow walk
    url = url_of(path, walk["values"])
    headers = {"If-Match": walk["etag"]} if op_id == "update_version" else {}
    query = {"from": 1, "to": 2} if op_id == "diff_versions" else {}
    if op_id == "start_run":
        headers["Idempotency-Key"] = "walked-start"
    if op_id == "replay_event":
        return walk["admin"].call(method, url, {"subscription": walk["topic_subscription"]})
    if op_id in ("receive", "receive_topic_hook"):
        secret = walk["trigger" if op_id == "receive" else "topic_hook"]["secret"]
        raw = json.dumps({"n": 1}).encode()
        return Api(None).call(method, url, raw=raw, headers=signed(secret, raw))
    return walk["admin"].call(method, url, BODIES.get(op_id), headers=headers, **query)


def in_session(method: str, url: str, body: Any, user: Any) -> Any:
    """Send as the browser does, signed in, but without the CSRF token an unsafe method needs."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    data = "" if body is None else json.dumps(body)
    return client.generic(method, url, data, content_type="application/json")


def refused(method: str, path: str, op: dict[str, Any], walk: dict[str, Any]) -> Iterator[Any]:
    """The requests that reach an operation's refusals."""
    url = url_of(path, walk["values"])
    admin = walk["admin"]
    body = BODIES.get(op["operationId"])
    yield Api(None).call(method, url, body)
    yield walk["short"].call(method, url, body)
    yield walk["over"].call(method, url, body)
    yield in_session(method, url, body, walk["person"])
    yield admin.call("TRACE", url)
    if "{" in path:
        yield admin.call(method, url_of(path, missing_values(op)), body)
    if "requestBody" in op:
        yield admin.call(method, url, raw="{")
        yield admin.call(method, url, raw=json.dumps(body or {}), content_type="text/plain")
        yield admin.call(method, url, raw=" " * BODY_LIMIT + "{}")
        yield admin.call(method, url, [])
    bad = bad_parameter(op)
    if bad is not None:
        query, headers = bad
        yield admin.call(method, url, body, headers=headers, **query)


def mismatches(op: dict[str, Any], response: Any) -> list[str]:
    """Name what differs between an answer and the document's word on its status."""
    op_id, status = op["operationId"], str(response.status_code)
    declared = op["responses"].get(status)
    if declared is None:
        return [f"{op_id} {status}: the status is not declared"]
    want = {name.lower(): name for name in declared.get("headers", {})}
    sent = {name.lower(): name for name in response.headers if name.lower() not in TRANSPORT}
    return [
        f"{op_id} {status}: {sent[h]} is sent but not declared" for h in sorted(set(sent) - set(want))
    ] + [f"{op_id} {status}: {want[h]} is declared but not sent" for h in sorted(set(want) - set(sent))]


def test_every_answer_carries_exactly_the_headers_declared_for_its_status(walk: dict[str, Any]) -> None:
    ops = list(operations())
    answers: list[tuple[dict[str, Any], Any]] = []
    for method, path, op in ops:
        answers.extend((op, response) for response in refused(method, path, op, walk))
    # Deletions last, the document's last first (a provider's price before the provider):
    # they take away what the other operations act on.
    order = {id(op): index for index, (_, _, op) in enumerate(ops)}
    for method, path, op in sorted(
        ops, key=lambda o: (o[0] == "DELETE", -order[id(o[2])] * (o[0] == "DELETE"))
    ):
        answers.append((op, meant_to_succeed(method, path, op, walk)))
        if op["operationId"] in REPLAYED:
            answers.append((op, meant_to_succeed(method, path, op, walk)))
    found = [problem for op, response in answers for problem in mismatches(op, response)]
    seen = {(op["operationId"], str(r.status_code)) for op, r in answers}
    succeeded = {op["operationId"] for op, r in answers if r.status_code < 300}
    assert {op["operationId"] for _, _, op in ops} - succeeded == REFUSED_ON_PURPOSE
    print(f"{len(answers)} answers, {len(seen)} (operation, status) pairs, {len(found)} mismatches")
    assert not found, "\n".join(found)


def test_with_postgresql_away_every_operation_answers_the_declared_503(walk: dict[str, Any]) -> None:
    """Each operation, sent as meant to succeed while PostgreSQL is away, answers 503 with
    Retry-After and nothing else the document does not declare (liveness, the document and
    its docs page answer without the stores: schema.STORELESS)."""
    port = connection.settings_dict["PORT"]
    connection.close()
    connection.settings_dict["PORT"] = dead_port()
    try:
        answers = [(op, meant_to_succeed(method, path, op, walk)) for method, path, op in operations()]
    finally:
        connection.close()
        connection.settings_dict["PORT"] = port
    statuses = {op["operationId"]: r.status_code for op, r in answers}
    # decide_by_link's walked token is refused by its signature, before any store is asked.
    answered = {"live", "schema_view", "docs_view", "decide_by_link"}
    assert {op_id for op_id, status in statuses.items() if status != 503} == answered, statuses
    found = [problem for op, response in answers for problem in mismatches(op, response)]
    assert not found, "\n".join(found)
