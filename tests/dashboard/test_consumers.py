"""The dashboard's websocket consumer: who may connect, what it receives, role checks per send."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore
from django.test import Client

from controlplane.asgi import websocket_app
from controlplane.origins import SameOriginValidator
from monitoring import consumers
from monitoring.services import events
from tests.integration.conftest import node, publish
from workflows.runs import actions as runs

# Transactional: the consumer's database calls run on their own connection handling, which
# closes a connection left inside a test's atomic block.
pytestmark = pytest.mark.django_db(transaction=True)

APP = SameOriginValidator(websocket_app)  # the websocket stack Daphne serves


@pytest.fixture(autouse=True)
def in_memory_layer(settings: Any) -> None:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.MONITOR = {**settings.MONITOR, "RECHECK_SECONDS": 0}  # ask the database before each send
    consumers._decisions.clear()


def session_cookie(user: User | None) -> list[tuple[bytes, bytes]]:
    headers = [(b"origin", b"http://localhost:8000"), (b"host", b"localhost:8000")]
    if user is not None:
        client = Client()
        client.force_login(user)
        key = client.cookies[django_settings.SESSION_COOKIE_NAME].value
        headers.append((b"cookie", f"{django_settings.SESSION_COOKIE_NAME}={key}".encode()))
    return headers


def communicator(headers: list[tuple[bytes, bytes]], topics: str = "overview") -> WebsocketCommunicator:
    return WebsocketCommunicator(APP, f"/ws/monitor/?topics={topics}", headers=headers)


def snapshot(topic: str, seq: int, **data: Any) -> events.Message:
    return {"topic": topic, "epoch": 1, "seq": seq, "data": {"at": 0, **data}, "html": {"x": f"<b>{seq}</b>"}}


def test_unauthenticated_connection_is_refused(db: None) -> None:
    headers = session_cookie(None)

    async def scenario() -> tuple[bool, Any]:
        return await communicator(headers).connect()

    connected, code = async_to_sync(scenario)()
    assert not connected and code == 4403


def test_user_without_a_role_is_refused(role_user: Any) -> None:
    headers = session_cookie(role_user(None))

    async def scenario() -> tuple[bool, Any]:
        return await communicator(headers).connect()

    assert async_to_sync(scenario)() == (False, 4403)


def test_unknown_topic_is_refused(role_user: Any) -> None:
    headers = session_cookie(role_user("viewer"))

    async def scenario() -> tuple[bool, Any]:
        return await communicator(headers, "overview,secrets").connect()

    assert async_to_sync(scenario)() == (False, 4400)


def test_foreign_origin_is_refused(role_user: Any) -> None:
    headers = [(b"origin", b"http://evil.example")] + session_cookie(role_user("viewer"))[1:]

    async def scenario() -> tuple[bool, Any]:
        return await WebsocketCommunicator(APP, "/ws/monitor/?topics=overview", headers=headers).connect()

    connected, _ = async_to_sync(scenario)()
    assert not connected


@pytest.mark.parametrize(
    ("origin", "host", "allowed"),
    [
        ("http://127.0.0.1:8000", "127.0.0.1:8000", True),
        ("http://127.0.0.1:9000", "127.0.0.1:8000", False),  # another port of the same host
        ("http://127.0.0.1", "127.0.0.1:8000", False),
        ("https://127.0.0.1:8000", "127.0.0.1:8000", False),  # another scheme
        ("http://evil.example:8000", "evil.example:8000", False),  # a host not in ALLOWED_HOSTS
        ("", "127.0.0.1:8000", False),
    ],
)
def test_a_websocket_is_accepted_only_from_the_same_origin_port_included(
    role_user: Any, origin: str, host: str, allowed: bool
) -> None:
    headers = [(b"origin", origin.encode()), (b"host", host.encode())] + session_cookie(role_user("viewer"))[
        2:
    ]

    async def scenario() -> tuple[bool, Any]:
        return await WebsocketCommunicator(APP, "/ws/monitor/?topics=overview", headers=headers).connect()

    connected, _ = async_to_sync(scenario)()
    assert connected is allowed


def test_viewer_receives_snapshots_with_sequence_numbers_of_its_topics_only(role_user: Any) -> None:
    headers = session_cookie(role_user("viewer"))

    async def scenario() -> list[Any]:
        ws = communicator(headers, "overview")
        assert (await ws.connect())[0]
        await events.publish([snapshot("workers", 1), snapshot("overview", 1), snapshot("overview", 2)])
        received = [await ws.receive_json_from(timeout=10), await ws.receive_json_from(timeout=10)]
        assert await ws.receive_nothing(0.1)
        await ws.disconnect()
        return received

    first, second = async_to_sync(scenario)()
    assert (first["topic"], first["seq"], second["seq"]) == ("overview", 1, 2)
    assert first["html"] == {"x": "<b>1</b>"} and "type" not in first


def test_a_deactivated_user_gets_no_more_messages_and_is_disconnected(role_user: Any) -> None:
    user = role_user("viewer")
    headers = session_cookie(user)

    async def scenario() -> Any:
        ws = communicator(headers, "overview")
        assert (await ws.connect())[0]
        await events.publish([snapshot("overview", 1)])
        assert (await ws.receive_json_from(timeout=10))["seq"] == 1
        await deactivate(user.pk)
        await events.publish([snapshot("overview", 2)])
        return await ws.receive_output()

    closed = async_to_sync(scenario)()
    assert closed == {"type": "websocket.close", "code": 4403}


def test_a_demoted_user_is_disconnected_before_the_next_send(role_user: Any) -> None:
    user = role_user("viewer")
    headers = session_cookie(user)

    async def scenario() -> Any:
        ws = communicator(headers, "overview")
        assert (await ws.connect())[0]
        await drop_roles(user.pk)
        await events.publish([snapshot("overview", 1)])
        return await ws.receive_output()

    assert async_to_sync(scenario)()["type"] == "websocket.close"


def test_a_logged_out_session_is_disconnected(role_user: Any) -> None:
    user = role_user("viewer")
    headers = session_cookie(user)

    async def scenario() -> Any:
        ws = communicator(headers, "overview")
        assert (await ws.connect())[0]
        await end_sessions()
        await events.publish([snapshot("overview", 1)])
        return await ws.receive_output()

    assert async_to_sync(scenario)()["type"] == "websocket.close"


def test_run_topic_sends_the_run_on_connect_and_again_when_it_changes(role_user: Any) -> None:
    workflow = publish(
        "consumer-run", {"nodes": [node("a"), node("b")], "edges": [{"source": "a", "target": "b"}]}
    )
    run, _ = runs.start_run(workflow, {})
    other, _ = runs.start_run(workflow, {})

    headers = session_cookie(role_user("operator"))

    async def scenario() -> list[Any]:
        ws = communicator(headers, f"run:{run.pk}")
        assert (await ws.connect())[0]
        first = await ws.receive_json_from(timeout=10)
        changes = {"at": 0, "overflow": False}
        await events.publish(
            [{"topic": "runs", "epoch": 5, "seq": 1, "data": {**changes, "runs": {str(other.pk): None}}}]
        )
        assert await ws.receive_nothing(0.2), "another run's change is not sent"
        await events.publish(
            [{"topic": "runs", "epoch": 5, "seq": 2, "data": {**changes, "runs": {str(run.pk): None}}}]
        )
        second = await ws.receive_json_from(timeout=10)
        # A missed change message (seq 3 never arrives) refreshes the run anyway.
        await events.publish([{"topic": "runs", "epoch": 5, "seq": 4, "data": {**changes, "runs": {}}}])
        third = await ws.receive_json_from(timeout=10)
        await ws.disconnect()
        return [first, second, third]

    first, second, third = async_to_sync(scenario)()
    assert first["topic"] == f"run:{run.pk}" and first["data"]["reset"] is True
    assert set(first["data"]["nodes"]) == {"a", "b"}
    assert 'data-action="cancel"' not in first["html"]["run-header"], "pushed fragments carry no forms"
    assert [first["seq"], second["seq"], third["seq"]] == [1, 2, 3]


def deactivate(user_id: int) -> Any:
    from channels.db import database_sync_to_async

    return database_sync_to_async(lambda: User.objects.filter(pk=user_id).update(is_active=False))()


def drop_roles(user_id: int) -> Any:
    from channels.db import database_sync_to_async

    return database_sync_to_async(lambda: User.objects.get(pk=user_id).groups.clear())()


def end_sessions() -> Any:
    from channels.db import database_sync_to_async

    return database_sync_to_async(lambda: SessionStore.get_model_class().objects.all().delete())()


@pytest.fixture
def clock(settings: Any, monkeypatch: Any) -> list[float]:
    """Role decisions last a second, on a clock the test moves by hand (clock[0])."""
    settings.MONITOR = {**settings.MONITOR, "RECHECK_SECONDS": 1.0}
    now = [1000.0]
    monkeypatch.setattr(consumers.time, "monotonic", lambda: now[0])
    return now


def test_a_recent_role_decision_is_shared_then_expires(role_user: Any, clock: list[float]) -> None:
    user = role_user("viewer")
    headers = session_cookie(user)

    async def scenario() -> list[Any]:
        ws = communicator(headers, "overview")
        assert (await ws.connect())[0]
        await events.publish([snapshot("overview", 1)])
        first = await ws.receive_json_from(timeout=10)
        await deactivate(user.pk)
        await events.publish([snapshot("overview", 2)])
        within = await ws.receive_json_from(timeout=10)  # the decision of a moment ago still holds
        clock[0] += 1.0
        await events.publish([snapshot("overview", 3)])
        return [first["seq"], within["seq"], await ws.receive_output()]

    first, within, closed = async_to_sync(scenario)()
    assert (first, within) == (1, 2)
    assert closed == {"type": "websocket.close", "code": 4403}


def test_a_connection_shares_the_recent_role_decision_then_a_fresh_one_refuses(
    role_user: Any, clock: list[float]
) -> None:
    user = role_user("viewer")
    headers = session_cookie(user)

    async def scenario() -> list[Any]:
        first = communicator(headers, "overview")
        assert (await first.connect())[0]
        await drop_roles(user.pk)
        second = communicator(headers, "overview")  # another tab, a moment later
        within = (await second.connect())[0]
        clock[0] += 1.0
        third = communicator(headers, "overview")
        after = await third.connect()
        for ws in (first, second):
            await ws.disconnect()
        return [within, after]

    within, after = async_to_sync(scenario)()
    assert within is True
    assert after == (False, 4403)
