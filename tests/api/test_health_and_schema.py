"""Health endpoints, the served OpenAPI document and the docs page; the schema matches the routes."""

from __future__ import annotations

import pytest
from django.urls import get_resolver

from tests.api.conftest import Api
from workflows.api.openapi import document, path_template
from workflows.api.routes import ROUTES
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


def test_the_schema_documents_every_route_and_method() -> None:
    doc = Api(None).get("openapi.json").json()
    assert doc["openapi"] == "3.1.0" and len(doc["paths"]) == len(ROUTES)
    for route in ROUTES:
        template, params = path_template(route.path)
        assert set(doc["paths"][template]) == {op.method.lower() for op in route.ops}
        for op in doc["paths"][template].values():
            assert [p["name"] for p in op["parameters"] if p["in"] == "path"] == [p["name"] for p in params]


def test_the_urlconf_is_generated_from_the_same_table() -> None:
    api_patterns = next(p for p in get_resolver().url_patterns if str(p.pattern) == "api/v1/")
    names = [p.name for p in api_patterns.url_patterns if p.name]
    assert names == [route.name for route in ROUTES]


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
