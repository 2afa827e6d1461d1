"""Health endpoints, the served OpenAPI document and the docs page; the schema matches the routes."""

from __future__ import annotations

import re

import pytest

from tests.api.conftest import Api, assert_problem
from workflows.api.api import document
from workflows.runtime import bus

pytestmark = pytest.mark.django_db


def test_liveness_needs_no_key() -> None:
    response = Api(None).get("health/live")
    assert response.status_code == 200 and response.json()["status"] == "ok"


def test_readiness_is_503_naming_what_is_missing() -> None:
    response = Api(None).get("health/ready")
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["postgres"]["ok"] and checks["redis"]["ok"]
    assert not checks["scheduler"]["ok"] and "runscheduler" in checks["scheduler"]["detail"]
    assert not checks["worker"]["ok"] and "rqworker" in checks["worker"]["detail"]


def test_readiness_is_200_with_a_scheduler_and_a_worker_beating() -> None:
    bus.heartbeat(bus.scheduler_key("s-1"), 5)
    bus.beat_worker("w-1", 5, {})
    response = Api(None).get("health/ready")
    assert response.status_code == 200, response.json()
    assert response.json()["checks"]["worker"]["detail"].startswith("1 alive")


def test_every_documented_path_serves_exactly_its_documented_methods() -> None:
    doc = Api(None).get("openapi.json").json()
    assert (
        doc["openapi"] == "3.1.0" and len(doc["paths"]) == 95
    )  # every path, counted when added (budgets: 3, forks: 3, secrets: 2, events: 5, topic hooks: 2, suites: 8, schedule run now: 1, graph export: 1, MCP servers: 4, provider health: 3)
    uuid = "2f1d6c1e-4d1b-4c5e-9a57-0f0e1c2b3a4d"
    samples = {"slug": "demo", "trigger_id": uuid, "hook_id": uuid}
    for template, item in doc["paths"].items():
        url = re.sub(r"{(\w+)}", lambda m: samples.get(m[1], "1"), template)
        response = Api(None).call("TRACE", url)
        assert_problem(response, 405)
        assert set(response["Allow"].split(", ")) == {m.upper() for m in item}, template
        for op in item.values():
            in_path = [p["name"] for p in op["parameters"] if p["in"] == "path"]
            assert in_path == re.findall(r"{(\w+)}", template), (template, op["operationId"])


def test_every_keyed_operation_names_its_scope_and_answers_401_403_429() -> None:
    for path, item in document()["paths"].items():
        for method, op in item.items():
            if op["security"]:
                assert op["x-scope"] in ("read", "run", "edit", "operate", "admin"), (path, method)
                assert {"401", "403", "429"} <= set(op["responses"]), (path, method)


def test_the_docs_page_lists_every_endpoint_without_external_assets() -> None:
    response = Api(None).get("docs")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    for path, item in document()["paths"].items():
        assert path in html
        for op in item.values():
            assert f'id="{op["operationId"]}"' in html
    assert 'id="problem-412"' in html
    assert "http://" not in html.replace("http://127.0.0.1:8000", "") and "https://" not in html


def test_the_docs_page_runs_swagger_ui_from_local_assets() -> None:
    from django.contrib.staticfiles import finders

    html = Api(None).get("docs").content.decode()
    for asset in ("ninja/swagger-ui-bundle.js", "ninja/swagger-ui-init.js", "ninja/swagger-ui.css"):
        assert f"/static/{asset}" in html and finders.find(asset), asset
    assert '"url": "/api/v1/openapi.json"' in html and '"validatorUrl": null' in html


def test_the_document_declares_headers_405s_and_a_real_definition_schema() -> None:
    from jsonschema import Draft202012Validator

    doc = Api(None).get("openapi.json").json()
    text = str(doc)
    assert "'ge':" not in text and "'le':" not in text  # pydantic's names, not JSON Schema's
    for schema in doc["components"]["schemas"].values():
        Draft202012Validator.check_schema(schema)
    start = doc["paths"]["/api/v1/workflows/{slug}/runs"]["post"]["responses"]
    assert {"Location", "RateLimit-Remaining"} <= set(start["201"]["headers"])
    assert {"Location", "Idempotent-Replayed"} <= set(start["200"]["headers"])  # the replay
    assert {"RateLimit-Remaining", "RateLimit-Reset"} <= set(start["404"]["headers"])  # counted too
    assert set(start["401"]["headers"]) == {"WWW-Authenticate"}
    assert "Retry-After" in start["429"]["headers"]
    version = doc["paths"]["/api/v1/workflows/{slug}/versions/{number}"]["get"]["responses"]
    assert "ETag" in version["200"]["headers"]
    publish = doc["paths"]["/api/v1/workflows/{slug}/versions/{number}/publish"]["post"]["responses"]
    assert "ETag" in publish["200"]["headers"]
    for item in doc["paths"].values():
        for op in item.values():
            assert set(op["responses"]["405"]["headers"]) == {"Allow"}, op["operationId"]
    definition = doc["components"]["schemas"]["VersionOut"]["properties"]["definition"]
    assert definition["$ref"] == "#/components/schemas/Definition"
    node = doc["components"]["schemas"]["NodeSpec"]
    assert {"id", "handler", "retry"} <= set(node["properties"]) and set(node["required"]) >= {
        "id",
        "handler",
    }
    assert set(doc["components"]["headers"]) >= {"ETag", "Location", "WWW-Authenticate", "Retry-After"}
