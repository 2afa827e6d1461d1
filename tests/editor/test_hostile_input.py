"""Text PostgreSQL cannot store, and JSON nested too deep, sent by the editor to /api/v1:
refused naming the field, never a 500, nothing saved."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.editor.conftest import JsonClient, api
from tests.factories import CHAIN, make_workflow
from workflows.store.models import Run, WorkflowVersion

pytestmark = pytest.mark.django_db

DEEP = '{"definition": ' + "[" * 1000 + "]" * 1000 + "}"
# The operations the editor calls with a body: check, new draft, test run of version 1.
OPERATIONS = ["validate", "versions", "versions/1/test-runs"]


@pytest.mark.parametrize("operation", OPERATIONS)
def test_json_nested_1000_deep_is_refused_not_a_500(editor: JsonClient, operation: str) -> None:
    make_workflow("deep")
    versions = WorkflowVersion.objects.count()
    response = editor.post(api("deep", operation), raw=DEEP)
    assert 400 <= response.status_code < 500, response.content
    assert response["Content-Type"] == "application/problem+json"
    assert WorkflowVersion.objects.count() == versions and not Run.objects.exists()


@pytest.mark.parametrize(
    ("operation", "body", "field"),
    [
        ("versions", {"definition": CHAIN, "comment": "a\x00b"}, "comment"),
        ("versions", {"definition": {**CHAIN, "description": "\ud800"}}, "definition.description"),
        ("validate", {"definition": {**CHAIN, "description": "a\x00"}}, "definition.description"),
        ("versions/1/test-runs", {"input": {"note": "a\x00b"}}, "input.note"),
    ],
)
def test_unstorable_text_in_a_body_names_the_field_and_saves_nothing(
    editor: JsonClient, operation: str, body: dict[str, Any], field: str
) -> None:
    make_workflow("nul")
    versions = WorkflowVersion.objects.count()
    response = editor.post(api("nul", operation), raw=json.dumps(body, ensure_ascii=True))
    assert 400 <= response.status_code < 500, response.content
    assert field.split(".")[-1] in json.dumps(response.json()["errors"]), response.json()
    assert WorkflowVersion.objects.count() == versions and not Run.objects.exists()
