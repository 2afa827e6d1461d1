"""The web process at SIGTERM (controlplane/webserver.py): it stops listening, answers the
request in flight in full, then exits by itself. A real Daphne process, a raw socket."""

from __future__ import annotations

import socket
from typing import Any

import httpx

from tests.integration.conftest import accepts, free_port
from tests.integration.runtime import Runtime, wait_for

BODY = b'{"key": "order-1", "payload": {"note": "' + b"x" * 2000 + b'"}}'


def refuses(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


def test_a_request_in_flight_at_sigterm_is_answered_in_full_and_new_ones_go_elsewhere(
    transactional_db: Any,
) -> None:
    port = free_port()
    rt = Runtime(SWITCHYARD_WEB_DRAIN_SECONDS="120")
    web = rt.web("web", port)
    try:
        wait_for(lambda: accepts(port), 30, "Daphne to listen")
        # A POST whose body is half sent: in flight, and not yet handed to Django.
        client = socket.create_connection(("127.0.0.1", port), timeout=20)
        head = (
            f"POST /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(BODY)}\r\n\r\n"
        ).encode()
        half = len(BODY) // 2
        client.sendall(head + BODY[:half])
        # Another request answered after it was sent: the server has read the first one's head
        # (one reactor; bytes sent earlier were readable first).
        assert httpx.get(f"http://127.0.0.1:{port}/api/v1/health/live", timeout=20).status_code == 200

        web.terminate()  # SIGTERM
        wait_for(lambda: refuses(port), 20, "the draining process to stop listening")
        assert web.poll() is None, "it waits for the request in flight"

        client.sendall(BODY[half:])
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.split(b"\r\n\r\n", 1)[1]:
            chunk = client.recv(65536)
            if not chunk:
                break
            answer += chunk
        client.close()
        status_line = answer.split(b"\r\n", 1)[0]
        assert status_line == b"HTTP/1.1 401 Unauthorized", answer[:300]  # answered, by the API
        assert b'"status": 401' in answer or b'"status":401' in answer

        assert web.wait(60) == 0, "it exits by itself once drained, not at the 120 s deadline"
    finally:
        rt.stop()


def test_a_connection_accepted_just_before_sigterm_gets_its_answer(transactional_db: Any) -> None:
    """The race of a rolling restart: the client connected, its request not yet read by the
    reactor when SIGTERM arrives (here it sends it 0.1 s after). Without the drain's grace
    for such connections, the process found nothing in flight and closed it unanswered."""
    port = free_port()
    rt = Runtime()
    web = rt.web("web", port)
    try:
        wait_for(lambda: accepts(port), 30, "Daphne to listen")
        client = socket.create_connection(("127.0.0.1", port), timeout=20)
        # Accepted: a request on another connection, sent after it, is answered first.
        assert httpx.get(f"http://127.0.0.1:{port}/api/v1/health/live", timeout=20).status_code == 200

        web.terminate()  # SIGTERM
        wait_for(lambda: refuses(port), 20, "the draining process to stop listening")
        client.sendall(
            f"GET /api/v1/health/live HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode()
        )
        answer = b""
        while chunk := client.recv(65536):
            answer += chunk
        client.close()

        assert answer.split(b"\r\n", 1)[0] == b"HTTP/1.1 200 OK", answer[:300]
        assert web.wait(60) == 0
    finally:
        rt.stop()
