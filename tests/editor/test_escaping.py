"""Names, configs, conditions and comments typed by people are shown as text, never markup."""

from __future__ import annotations

from typing import Any

from tests.editor.conftest import JsonClient, api, url
from workflows.versions import publish as versions

PAYLOAD = "</script><script>alert(1)</script><img src=x onerror=alert(2)>"
DEFINITION: dict[str, Any] = {
    "description": PAYLOAD,
    "nodes": [
        {"id": "fetch", "handler": "http.request", "config": {"url": f"https://example.test/{PAYLOAD}"}},
        {"id": "after", "handler": "core.noop"},
    ],
    "edges": [{"source": "fetch", "target": "after", "when": f'output.body == "{PAYLOAD}"'}],
}


def hostile_workflow() -> None:
    workflow = versions.create_workflow("hostile", f"Title {PAYLOAD}", PAYLOAD)
    versions.publish_version(versions.create_version(workflow, DEFINITION, comment=f"comment {PAYLOAD}"))
    versions.create_version(workflow, DEFINITION, comment=f"draft {PAYLOAD}")


def assert_inert(html: str) -> None:
    assert "<script>alert" not in html
    assert "<img src=x" not in html


def test_editor_page_escapes_the_title_and_the_embedded_config(editor: JsonClient) -> None:
    hostile_workflow()
    html = editor.get(url("hostile")).content.decode()
    assert_inert(html)
    assert "Title &lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in html
    embedded = html.split('id="editor-config" type="application/json">')[1].split("</script>")[0]
    assert "<" not in embedded and "\\u003C/script\\u003E" in embedded


def test_history_and_list_pages_escape_comments_and_titles(editor: JsonClient) -> None:
    hostile_workflow()
    for page in (url("hostile", "history/"), "/workflows/", url("hostile", "diff/") + "?from=1&to=2"):
        html = editor.get(page).content.decode()
        assert_inert(html)
    assert "comment &lt;/script&gt;" in editor.get(url("hostile", "history/")).content.decode()


def test_json_answers_carry_markup_only_as_json_strings(editor: JsonClient) -> None:
    hostile_workflow()
    response = editor.get(api("hostile", "versions/1"))
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["definition"]["edges"][0]["when"] == f'output.body == "{PAYLOAD}"'
    issues = editor.post(
        api("hostile", "validate"),
        {"definition": {"nodes": [{"id": "x", "handler": PAYLOAD}]}},
    )
    assert issues["Content-Type"].startswith("application/json")
    assert PAYLOAD in issues.json()["errors"][0]["message"]
