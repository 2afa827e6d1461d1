"""Secrets over the API and through a real worker: write-only, sealed at rest, checked on save,
resolved by http.request at call time and found nowhere afterwards (searched for)."""

from __future__ import annotations

from collections.abc import Callable
from io import StringIO
from typing import Any

from django.apps import apps
from django.core.management import call_command
from django.db import connection
from django.test import Client

from controlplane import access
from tests.api.conftest import Api, assert_problem
from tests.integration.conftest import node, publish, wait_finished
from tests.integration.runtime import LOGS, Runtime
from tests.integration.test_http_handlers import (
    Scripted,
    server,  # noqa: F401 - the fixture
    url,
)
from workflows.runs import actions as runs
from workflows.runtime import bus
from workflows.secrets import catalog
from workflows.store import secrets
from workflows.store.models import RecordedCall, Secret

VALUE = "sk-live-7f3a9c1e-never-shown"


def http_node(node_id: str, **config: Any) -> dict[str, Any]:
    return node(node_id, "http.request", config=config)


def test_a_secret_is_set_write_only_and_sealed_at_rest(api: Api) -> None:
    answer = api.put("secrets/API_TOKEN", {"value": VALUE, "description": "the billing API"})
    assert answer.status_code == 200, answer.content
    assert answer.json()["name"] == "API_TOKEN" and answer.json()["revision"] == 1
    again = api.put("secrets/API_TOKEN", {"value": VALUE + "-2"})
    assert again.json()["revision"] == 2
    for response in (answer, again, api.get("secrets"), api.get("secrets/API_TOKEN")):
        assert VALUE.encode() not in response.content
    row = Secret.objects.get(name="API_TOKEN")
    assert VALUE not in row.sealed and secrets.unseal(row.sealed, row.name) == VALUE + "-2"
    changes = api.get("secrets/API_TOKEN").json()["changes"]
    assert [(c["action"], c["revision"]) for c in changes] == [("secret.set", 2), ("secret.set", 1)]


def test_only_admins_may_touch_secrets(api_as: Callable[..., Api]) -> None:
    operator = api_as(access.OPERATOR, "run", "operate", "read")
    assert_problem(operator.put("secrets/API_TOKEN", {"value": VALUE}), 403)
    assert_problem(operator.get("secrets"), 403)
    assert not Secret.objects.exists()


def test_a_bad_name_or_an_empty_value_is_refused_naming_it(api: Api) -> None:
    assert_problem(api.put("secrets/9lives", {"value": VALUE}), 404, "name")  # the house rule for paths
    assert_problem(api.put("secrets/OK_NAME", {"value": ""}), 422, "value")


def test_a_missing_secret_fails_validation_naming_node_and_field(api: Api) -> None:
    api.post("workflows", {"slug": "calls", "title": "Calls"})
    definition = {
        "nodes": [
            http_node(
                "fetch", url="https://api.example.test/x", headers={"Authorization": "Bearer {secret.NOPE}"}
            )
        ],
        "edges": [],
    }
    body = assert_problem(api.post("workflows/calls/versions", {"definition": definition}), 422)
    (error,) = body["errors"]
    assert error["code"] == "unknown_secret" and error["node"] == "fetch"
    assert error["field"] == "nodes[0].config.headers.Authorization" and "NOPE" in error["message"]


def test_a_secret_where_it_is_not_resolved_is_refused(api: Api) -> None:
    catalog.set_secret("API_TOKEN", VALUE)
    api.post("workflows", {"slug": "chat", "title": "Chat"})
    definition = {
        "nodes": [node("ask", "llm.chat", config={"prompt": "say {secret.API_TOKEN}"})],
        "edges": [],
    }
    body = assert_problem(api.post("workflows/chat/versions", {"definition": definition}), 422)
    assert [e["code"] for e in body["errors"]] == ["secret_not_allowed"]


def test_rotate_reseals_every_secret_under_the_new_key(db: Any, settings: Any) -> None:
    catalog.set_secret("API_TOKEN", VALUE)
    old = settings.SWITCHYARD["SECRETS_KEY"]
    new = secrets.new_key()
    settings.SWITCHYARD = {**settings.SWITCHYARD, "SECRETS_KEY": f"{new},{old}"}
    out = StringIO()
    call_command("secrets", "rotate", stdout=out)
    assert "1 secrets re-sealed" in out.getvalue()
    settings.SWITCHYARD = {**settings.SWITCHYARD, "SECRETS_KEY": new}
    assert secrets.reveal("API_TOKEN") == VALUE


def everything_stored() -> str:
    """Every row of every table of the workflows app (and the audit), as text."""
    texts = []
    with connection.cursor() as cursor:
        for model in apps.get_app_config("workflows").get_models():
            cursor.execute(f"SELECT t::text FROM {model._meta.db_table} t")  # noqa: S608 - our own table names
            texts += [row[0] for row in cursor.fetchall()]
    return "\n".join(texts)


def test_a_secret_is_resolved_at_call_time_and_found_nowhere_after(
    api: Api,
    runtime: Runtime,
    server: Scripted,  # noqa: F811 - the fixture imported above
    admin_client: Client,
) -> None:
    catalog.set_secret("API_TOKEN", VALUE)
    definition = {
        "nodes": [
            # The echo route answers the request it saw: headers, query and body, value and all.
            http_node(
                "echo",
                url=url(server, "/echo?key={secret.API_TOKEN}"),
                method="POST",
                headers={"Authorization": "Bearer {secret.API_TOKEN}"},
                json={"token": "{secret.API_TOKEN}", "note": "with {secret.API_TOKEN} inside"},
            ),
            # A 404 whose error message quotes the URL, the value in its path.
            http_node("missing", url=url(server, "/missing/{secret.API_TOKEN}")),
        ],
        "edges": [],
    }
    workflow = publish("secret-calls", definition)
    run, _ = runs.start_run(workflow, {"q": "{secret.API_TOKEN}"})  # input is never read as a reference
    wait_finished(run)

    seen = {r["path"]: r for r in server.seen}
    assert seen["/echo"]["headers"]["authorization"] == f"Bearer {VALUE}"
    assert seen["/echo"]["query"]["key"] == [VALUE]
    assert seen["/echo"]["json"] == {"token": VALUE, "note": f"with {VALUE} inside"}
    assert seen[f"/missing/{VALUE}"]

    echo = run.nodes.get(node_id="echo")
    assert echo.output["json"]["json"]["token"] == "[secret:API_TOKEN]"
    assert echo.output["json"]["headers"]["authorization"] == "Bearer [secret:API_TOKEN]"
    missing = run.nodes.get(node_id="missing")
    assert "[secret:API_TOKEN]" in missing.error

    recorded = RecordedCall.objects.filter(run=run, node_id="echo").get()  # the call as forks replay it
    assert "[secret:API_TOKEN]" in recorded.request["url"] and VALUE not in str(recorded.response)
    assert VALUE not in everything_stored()
    logs = "".join(p.read_text(errors="replace") for p in LOGS.glob("*.log"))
    assert VALUE not in logs
    answers = [
        api.get(f"runs/{run.pk}"),
        api.get(f"runs/{run.pk}/events"),
        api.get("deadletters"),
        api.get(f"runs/{run.pk}/trace"),
        api.get("secrets"),
        admin_client.get(f"/runs/{run.pk}/"),
        admin_client.get("/secrets/"),
        admin_client.get("/dead-letters/"),
    ]
    for answer in answers:
        assert answer.status_code == 200, (answer.request["PATH_INFO"], answer.status_code)
        assert VALUE.encode() not in answer.content


def test_a_worker_without_slots_resolves_and_redacts_the_same(
    transactional_db: Any,
    server: Scripted,  # noqa: F811 - the fixture imported above
) -> None:
    catalog.set_secret("API_TOKEN", VALUE)
    definition = {
        "nodes": [http_node("echo", url=url(server, "/echo"), headers={"X-Token": "{secret.API_TOKEN}"})],
        "edges": [],
    }
    workflow = publish("secret-sync", definition)
    bus.client().flushdb()
    bus.ensure_group()
    rt = Runtime(SWITCHYARD_WORKER_SLOTS="0")  # the one-at-a-time path: http_request, not its coroutine
    rt.worker("sync-worker")
    rt.scheduler("sync-scheduler")
    try:
        run, _ = runs.start_run(workflow, {})
        wait_finished(run)
    finally:
        rt.stop()
    assert server.seen[0]["headers"]["x-token"] == VALUE
    assert run.nodes.get().output["json"]["headers"]["x-token"] == "[secret:API_TOKEN]"
    assert VALUE not in everything_stored()
