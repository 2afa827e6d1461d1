"""Text PostgreSQL cannot store, and JSON nested too deep, sent to the editor's endpoints:
refused naming the field, never a 500, nothing saved."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.editor.conftest import JsonClient, url
from tests.factories import CHAIN, make_workflow
from workflows.models import Run, WorkflowVersion

pytestmark = pytest.mark.django_db

DEEP = '{"definition": ' + "[" * 1000 + "]" * 1000 + "}"


@pytest.mark.parametrize("endpoint", ["api/validate", "api/save", "api/test-runs"])
def test_json_nested_1000_deep_is_refused_not_a_500(editor: JsonClient, endpoint: str) -> None:
    make_workflow("deep")
    versions = WorkflowVersion.objects.count()
    response = editor.post(url("deep", endpoint), raw=DEEP)
    assert response.status_code == 422 and "nested too deeply" in response.json()["error"]
    assert WorkflowVersion.objects.count() == versions and not Run.objects.exists()


@pytest.mark.parametrize(
    ("endpoint", "body", "field"),
    [
        ("api/save", {"base": None, "definition": CHAIN, "comment": "a\x00b"}, "comment"),
        (
            "api/save",
            {"base": None, "definition": {**CHAIN, "description": "\ud800"}},
            "definition.description",
        ),
        ("api/validate", {"definition": {**CHAIN, "description": "a\x00"}}, "definition.description"),
        ("api/test-runs", {"input": {"note": "a\x00b"}}, "input.note"),
    ],
)
def test_unstorable_text_in_an_editor_body_names_the_field_and_saves_nothing(
    editor: JsonClient, endpoint: str, body: dict[str, Any], field: str
) -> None:
    make_workflow("nul")
    versions = WorkflowVersion.objects.count()
    response = editor.post(url("nul", endpoint), raw=json_escaped(body))
    assert response.status_code == 422, response.content
    assert [i["field"] for i in response.json()["issues"]] == [field]
    assert WorkflowVersion.objects.count() == versions and not Run.objects.exists()


def test_a_nul_in_an_editor_query_parameter_is_400(editor: JsonClient) -> None:
    make_workflow("query")
    response = editor.get(url("query", "api/diff"), **{"from": "1\x00"})
    assert response.status_code == 400 and response.json()["issues"][0]["field"] == "from"


def json_escaped(body: dict[str, Any]) -> str:
    """JSON with \\u escapes, as a browser's JSON.stringify sends a lone surrogate."""
    return json.dumps(body, ensure_ascii=True)
