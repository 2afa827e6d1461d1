"""The OpenAPI 3.1 document, generated from the route table, and the docs page that shows it.

Paths and parameters come from `routes.ROUTES` (Django path converters become typed path
parameters); request and response schemas from the pydantic models and TypedDicts the
views use (inputs.py, serializers.py); the problems an operation can answer from what the
dispatcher does for it (auth: 401/403/429, a body: 400/413/415/422, ...) plus its own list.
Built once per process.
"""

from __future__ import annotations

import re
from functools import lru_cache
from http import HTTPStatus
from typing import Any

from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from pydantic import BaseModel, TypeAdapter

from controlplane import access
from workflows.api.routing import MAX_ID, Call, Op, Route

REF = "#/components/schemas/{model}"
CONVERTERS: dict[str, dict[str, Any]] = {
    "slug": {"type": "string", "pattern": "^[-a-zA-Z0-9_]+$"},
    "id": {"type": "integer", "minimum": 1, "maximum": MAX_ID},
    "uuid": {"type": "string", "format": "uuid"},
}
PROBLEM_HELP = {
    400: "The request is malformed: JSON syntax, a query parameter or a header; `errors` names it.",
    401: "No API key, an unknown, revoked or expired one; or, on a hook, a bad or stale signature.",
    403: "The key's scopes or its owner's role do not allow the action; `detail` says which is missing.",
    404: "No such object (or no such path).",
    405: "The path exists but not with this method; `Allow` lists the methods.",
    409: "The request conflicts with the object's state: published version, in-flight runs, "
    "an Idempotency-Key used with another input, a dead letter already resolved.",
    412: "If-Match names a revision that is no longer current; `current` is the version as it is now.",
    428: "If-Match is missing: read the version first and send its ETag back.",
    413: "The body is larger than the server accepts.",
    415: "The body is not sent as application/json.",
    422: "The body is well-formed JSON but invalid; `errors` has one entry per invalid field.",
    429: "Rate limit reached; wait `Retry-After` seconds.",
}
PROBLEM_SCHEMA = {"$ref": REF.format(model="Problem")}


def schema_view(call: Call) -> HttpResponse:
    """Serve this OpenAPI document."""
    return JsonResponse(document(), json_dumps_params={"ensure_ascii": False})


def docs_view(call: Call) -> HttpResponse:
    """Serve the documentation page: every endpoint, rendered from the same document."""
    doc = document()
    return render(
        call.request, "api/docs.html", {"doc": doc, "operations": operations(doc), "problems": problems()}
    )


@lru_cache(maxsize=1)
def document() -> dict[str, Any]:
    from workflows.api.routes import ROUTES  # routes imports this module's views

    return build(ROUTES)


def build(routes: list[Route]) -> dict[str, Any]:
    refs, schemas = component_schemas(routes)
    paths: dict[str, Any] = {}
    for route in routes:
        template, params = path_template(route.path)
        paths[template] = {op.method.lower(): operation(op, params, refs) for op in route.ops}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Switchyard API",
            "version": "1",
            "description": "Everything a person can do in Switchyard, over HTTP. Authenticate with "
            "`Authorization: Bearer sy_<prefix>_<secret>`; errors are RFC 9457 problem documents.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "apiKey": {"type": "http", "scheme": "bearer", "bearerFormat": "sy_<prefix>_<secret>"}
            },
        },
    }


def component_schemas(routes: list[Route]) -> tuple[dict[Any, Any], dict[str, Any]]:
    """Return (type, mode) -> schema or $ref, and the named schemas for components."""
    from workflows.api.serializers import Problem

    wanted: dict[tuple[Any, str], Any] = {(Problem, "serialization"): Problem}
    for route in routes:
        for op in route.ops:
            if op.body is not None:
                wanted[(op.body, "validation")] = op.body
            for kind in op.responses.values():
                if kind is not None:
                    wanted[(kind, "serialization")] = kind
    inputs = [(key, key[1], TypeAdapter(kind)) for key, kind in wanted.items()]
    schemas, top = TypeAdapter.json_schemas(inputs, ref_template=REF)  # type: ignore[arg-type]
    return {key[0][0]: schema for key, schema in schemas.items()}, top.get("$defs", {})


def path_template(path: str) -> tuple[str, list[dict[str, Any]]]:
    params = []
    for converter, name in re.findall(r"<(\w+):(\w+)>", path):
        params.append({"name": name, "in": "path", "required": True, "schema": CONVERTERS[converter]})
    return "/api/v1/" + re.sub(r"<\w+:(\w+)>", r"{\1}", path), params


def operation(op: Op, path_params: list[dict[str, Any]], refs: dict[Any, Any]) -> dict[str, Any]:
    doc = (op.view.__doc__ or "").strip()
    result: dict[str, Any] = {
        "operationId": op.view.__name__,
        "summary": op.summary,
        "description": doc,
        "tags": [op.tag],
        "parameters": path_params + query_params(op.query) + header_params(op),
        "responses": responses(op, refs, bool(path_params)),
    }
    if op.action is not None:
        role, scope = access.ACTIONS[op.action]
        result["security"] = [{"apiKey": []}]
        result["x-scope"], result["x-role"] = scope, role
        result["description"] += f"\n\nNeeds an API key with the `{scope}` scope, held by a {role} or above."
    else:
        result["security"] = []
    if op.body is not None:
        result["requestBody"] = {
            "required": bool(op.body.model_json_schema().get("required")),
            "content": {"application/json": {"schema": refs[op.body]}},
        }
    return result


def query_params(model: type[BaseModel] | None) -> list[dict[str, Any]]:
    if model is None:
        return []
    schema = model.model_json_schema(by_alias=True)
    required = set(schema.get("required", []))
    params = []
    for name, prop in schema.get("properties", {}).items():
        param: dict[str, Any] = {"name": name, "in": "query", "required": name in required}
        prop = not_null(prop)
        if "description" in prop:
            param["description"] = prop.pop("description")
        param["schema"] = prop
        params.append(param)
    return params


def not_null(prop: dict[str, Any]) -> dict[str, Any]:
    """Drop the `null` alternative and a null default: a query parameter is absent instead."""
    prop = {k: v for k, v in prop.items() if k not in ("title",) and not (k == "default" and v is None)}
    alternatives = [a for a in prop.pop("anyOf", []) if a.get("type") != "null"]
    if len(alternatives) == 1:
        prop.update(alternatives[0])
    elif alternatives:
        prop["anyOf"] = alternatives
    return prop


def header_params(op: Op) -> list[dict[str, Any]]:
    return [
        {
            "name": h.name,
            "in": "header",
            "required": h.required,
            "description": h.description,
            "schema": {"type": "string", "maxLength": h.max_length, "pattern": f"^(?:{h.pattern})$"},
        }
        for h in op.headers
    ]


def responses(op: Op, refs: dict[Any, Any], has_path_params: bool) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for status, kind in op.responses.items():
        entry: dict[str, Any] = {"description": HTTPStatus(status).phrase}
        if kind is not None:
            entry["content"] = {"application/json": {"schema": refs[kind]}}
        elif status != 204:
            entry["content"] = {
                op.media_type: {"schema": {"type": "object"} if "json" in op.media_type else {}}
            }
        result[str(status)] = entry
    for status in sorted(problem_statuses(op, has_path_params)):
        result[str(status)] = {
            "description": PROBLEM_HELP.get(status, HTTPStatus(status).phrase),
            "content": {"application/problem+json": {"schema": PROBLEM_SCHEMA}},
        }
    return result


def problem_statuses(op: Op, has_path_params: bool) -> set[int]:
    statuses = set(op.errors)
    if op.action is not None:
        statuses |= {401, 403, 429}
    if op.body is not None:
        statuses |= {400, 413, 415, 422}
    if op.query is not None or op.headers:
        statuses.add(400)
    if has_path_params:
        statuses.add(404)
    return statuses


def operations(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Flatten the document for the docs page, in table order."""
    items = []
    for path, item in doc["paths"].items():
        for method, op in item.items():
            items.append(
                {
                    "method": method.upper(),
                    "path": path,
                    "scope": op.get("x-scope"),
                    "role": op.get("x-role"),
                    **op,
                }
            )
    return items


def problems() -> list[dict[str, Any]]:
    return [
        {"status": status, "title": HTTPStatus(status).phrase, "help": text}
        for status, text in sorted(PROBLEM_HELP.items())
    ]
