"""The browser's session as a second way into the API: roles as for pages, CSRF on unsafe methods."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.api.conftest import PREFIX, Api, assert_problem
from workflows.store.models import AuditEntry

pytestmark = pytest.mark.django_db

ONE = {"nodes": [{"id": "a", "handler": "core.noop"}]}
TWO = {
    "nodes": [{"id": "a", "handler": "core.noop"}, {"id": "b", "handler": "core.echo"}],
    "edges": [{"source": "a", "target": "b"}],
}


def browser_of(user) -> tuple[Client, str]:
    """Sign `user` in with CSRF enforced, as a browser is; return the client and its CSRF token."""
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    browser.get(f"{PREFIX}/docs")  # a page that renders the CSRF token sets its cookie
    return browser, browser.cookies["csrftoken"].value


def put_draft(browser: Client, number: int, etag: str, token: str | None):
    headers = {"If-Match": etag, **({"X-CSRFToken": token} if token else {})}
    return browser.put(
        f"{PREFIX}/workflows/chain/versions/{number}",
        {"definition": TWO},
        content_type="application/json",
        headers=headers,
    )


@pytest.fixture
def draft(api, chain) -> tuple[int, str]:
    response = api.post("workflows/chain/versions", {"definition": ONE})
    return response.json()["number"], response["ETag"]


def test_a_signed_in_editor_puts_a_draft_with_the_csrf_token(person, draft) -> None:
    editor = person("editor")
    browser, token = browser_of(editor)
    number, etag = draft
    response = put_draft(browser, number, etag, token)
    assert response.status_code == 200, response.content
    assert [n["id"] for n in response.json()["definition"]["nodes"]] == ["a", "b"]
    assert AuditEntry.objects.get(action="version.update").actor == editor


def test_a_session_request_without_the_csrf_token_is_a_403_problem(person, draft) -> None:
    browser, _ = browser_of(person("editor"))
    number, etag = draft
    body = assert_problem(put_draft(browser, number, etag, None), 403, "X-CSRFToken")
    assert "CSRF" in body["detail"]


def test_a_signed_in_viewer_reads_but_may_not_edit(person, draft) -> None:
    browser, token = browser_of(person("viewer"))
    number, etag = draft
    assert browser.get(f"{PREFIX}/workflows/chain/versions/{number}").status_code == 200
    body = assert_problem(put_draft(browser, number, etag, token), 403)
    assert "editor role" in body["detail"]


def test_an_anonymous_request_is_401(draft) -> None:
    number, etag = draft
    anonymous = Client(enforce_csrf_checks=True)
    response = put_draft(anonymous, number, etag, None)
    assert_problem(response, 401, "Authorization")
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert_problem(Api(None).get("workflows"), 401)


def test_an_api_key_needs_no_csrf_token_even_beside_a_session(person, key_for, draft) -> None:
    browser, _ = browser_of(person("viewer"))
    number, etag = draft
    response = browser.put(
        f"{PREFIX}/workflows/chain/versions/{number}",
        {"definition": TWO},
        content_type="application/json",
        headers={"If-Match": etag, "Authorization": f"Bearer {key_for('editor', ('edit',))}"},
    )
    assert response.status_code == 200, response.content


def test_the_document_names_both_ways_in(api) -> None:
    doc = api.get("openapi.json").json()
    schemes = doc["components"]["securitySchemes"]
    assert schemes["apiKey"] == {"type": "http", "scheme": "bearer", "bearerFormat": "sy_<prefix>_<secret>"}
    assert schemes["session"] == {"type": "apiKey", "in": "cookie", "name": "sessionid"}
    put = doc["paths"]["/api/v1/workflows/{slug}/versions/{number}"]["put"]
    assert put["security"] == [{"apiKey": []}, {"session": []}]
