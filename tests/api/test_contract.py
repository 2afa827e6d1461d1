"""The served OpenAPI document keeps the contract integrators generate clients from.

`openapi_operations_v1.json` was made from /api/v1/openapi.json as the hand-written API
served it, before the move to django-ninja (`openapi_v1_before.json` is that whole
document). Clients take their function names from operation ids and their model names
from component schema names, and send the parameters documented then: none of it may be
removed or renamed. Things may be added: more documented answers, a new optional
parameter, another security scheme.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.api.conftest import Api

pytestmark = pytest.mark.django_db

HERE = Path(__file__).parent
PINNED = json.loads((HERE / "openapi_operations_v1.json").read_text())["operations"]
BEFORE = json.loads((HERE / "openapi_v1_before.json").read_text())


@pytest.fixture(scope="module")
def served(django_db_blocker: Any) -> dict[str, Any]:
    with django_db_blocker.unblock():
        response = Api(None).get("openapi.json")
    assert response.status_code == 200
    return response.json()


def served_op(doc: dict[str, Any], pinned: dict[str, Any]) -> dict[str, Any]:
    item = doc["paths"].get(pinned["path"], {})
    assert pinned["method"].lower() in item, f"{pinned['method']} {pinned['path']} is gone"
    return item[pinned["method"].lower()]


@pytest.mark.parametrize("pinned", PINNED, ids=lambda p: f"{p['method']} {p['path']}")
def test_every_operation_keeps_its_id_answers_and_parameters(served, pinned) -> None:
    op = served_op(served, pinned)
    assert op["operationId"] == pinned["operationId"]
    assert set(pinned["responses"]) <= set(op["responses"]), "documented answers were removed"
    params = {(p["in"], p["name"]): p.get("required", False) for p in op.get("parameters", [])}
    for where, name, required in pinned["parameters"]:
        assert (where, name) in params, f"{where} parameter {name} is gone"
        assert params[(where, name)] == required, f"{where} parameter {name} changed required-ness"
    added = {key for key, required in params.items() if required} - {
        (w, n) for w, n, _ in pinned["parameters"]
    }
    assert not added, f"new required parameters break existing clients: {added}"
    body = op.get("requestBody")
    assert (body is None) == (pinned["requestBody"] is None)
    if body is not None:
        assert body.get("required", False) == (pinned["requestBody"] == "required")
    schemes = {name for requirement in op.get("security", []) for name in requirement}
    assert set(pinned["security"]) <= schemes


def test_every_operation_id_is_unique(served) -> None:
    ids = [op["operationId"] for item in served["paths"].values() for op in item.values()]
    assert len(ids) == len(set(ids))


def test_component_schemas_keep_their_names(served) -> None:
    missing = set(BEFORE["components"]["schemas"]) - set(served["components"]["schemas"])
    assert not missing, f"client model names would change: {sorted(missing)}"


def test_every_error_answer_is_a_problem_document(served) -> None:
    for path, item in served["paths"].items():
        for method, op in item.items():
            for status, answer in op["responses"].items():
                if int(status) >= 400 and not (status == "503" and "health" in path):
                    content = answer.get("content", {})
                    assert list(content) == ["application/problem+json"], (method, path, status)
                    assert content["application/problem+json"]["schema"] == {
                        "$ref": "#/components/schemas/Problem"
                    }
