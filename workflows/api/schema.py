"""The OpenAPI document django-ninja generates, with what our integrators rely on, and the docs page.

ninja builds paths, parameters, bodies and answers from the views' signatures. This module
adds, per operation, in one subclass of ninja's `OpenAPISchema`:
- the problems it can answer, each `application/problem+json` with the `Problem` schema:
  what its checks imply (a key: 401/403/429; a body: 400/413/415/422; a query string or a
  header: 400; an id in the path: 404) plus what the view declares with `@refuses(...)`;
- the action's scope and role (`x-scope`, `x-role`, a line of the description), read from
  controlplane/access.py through the operation's auth;
- `security: []` on operations that need no key (ninja leaves it out), and the scheme names
  `apiKey` and `session` (ninja would use the class names);
- query parameters without the `null` alternative (an absent parameter is the null), and
  without the query models ninja would also file as components;
- the body of the signed hook, which the view reads raw (ninja does not parse it);
- the response headers each answer carries (`HEADERS`, as components; `answer_headers`
  says which, per operation and status): exactly those sent, checked by walking every
  operation (tests/api/test_declared_headers.py);
- 405 on every operation (the path exists, the method does not: `Allow` lists those that do);
- a real schema for a workflow `definition` (`Definition`, from the core's own node and edge
  models) where the views declare an open object, but for the validation endpoint's input,
  which takes anything and answers what is wrong with it.

A body whose fields all have defaults has a default in the view's signature: ninja then
documents it as optional and takes an empty body for `{}`, as the API always has.

The docs page is ninja's Swagger UI from the assets ninja ships (served by Django's static
files, no CDN, the online validator off), above a server-rendered index: every operation
and, as anchors, the problem types every problem's `type` points at.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, TypeVar

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from ninja import NinjaAPI, Swagger
from ninja.openapi.schema import REF_TEMPLATE, OpenAPISchema
from ninja.operation import Operation
from pydantic import TypeAdapter

from controlplane import access
from workflows.api.auth import KeyAuth
from workflows.core.definition import EdgeSpec, NodeSpec

F = TypeVar("F", bound=Callable[..., Any])
PROBLEM_SCHEMA = {"$ref": REF_TEMPLATE.format(model="Problem")}
PROBLEM_HELP = {
    400: "The request is malformed: JSON syntax, a query parameter or a header; `errors` names it.",
    401: "No API key, an unknown, revoked or expired one; or, on a hook, a bad or stale signature.",
    403: "The key's scopes or its owner's role (or the signed-in person's role) do not allow the "
    "action; `detail` says which is missing. A session request without its CSRF token.",
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
    503: "PostgreSQL or Redis is away; nothing was changed. Wait `Retry-After` seconds and send "
    "again (a start with its Idempotency-Key is safe to resend).",
}


HEADERS: dict[str, dict[str, Any]] = {
    "Location": {"description": "The URL of the object created.", "schema": {"type": "string"}},
    "ETag": {
        "description": 'The version\'s revision, like "12-3": send it back as If-Match to change the version.',
        "schema": {"type": "string"},
    },
    "Idempotent-Replayed": {
        "description": "`true` when this answers an earlier request with the same Idempotency-Key.",
        "schema": {"type": "string", "enum": ["true"]},
    },
    "WWW-Authenticate": {"description": "The scheme to authenticate with.", "schema": {"type": "string"}},
    "Retry-After": {"description": "Seconds to wait before trying again.", "schema": {"type": "integer"}},
    "Allow": {"description": "The methods this path answers.", "schema": {"type": "string"}},
    "RateLimit-Limit": {
        "description": "Requests the key may make per window.",
        "schema": {"type": "integer"},
    },
    "RateLimit-Remaining": {"description": "Requests left in this window.", "schema": {"type": "integer"}},
    "RateLimit-Reset": {"description": "Seconds until the window resets.", "schema": {"type": "integer"}},
    "Cache-Control": {"description": "`no-cache`: the stream is live.", "schema": {"type": "string"}},
    "X-Accel-Buffering": {
        "description": "`no`: tells a proxy (nginx) to pass each event on at once.",
        "schema": {"type": "string", "enum": ["no"]},
    },
}
RATE_HEADERS = ("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset")
# Operations that answer without PostgreSQL or Redis: every other one may answer 503.
STORELESS = {"live", "schema_view", "docs_view"}
REPLAYED_ON = {"start_run", "receive", "fork_run"}  # operations answering a repeated Idempotency-Key (200)
CHECKS_ANY_DEFINITION = {"ValidateIn"}  # it answers 200 {"valid": false, ...} for anything
VERSION_ETAG = {"create_version", "read_version", "update_version", "publish_version", "activate_version"}
CREATES_NO_OBJECT = {"make_decision_link"}  # a 201 whose token is the credential: no URL to name
STREAMS = {"stream_attempt"}
RATED_BY_TRIGGER = {
    "receive",
    "receive_topic_hook",
}  # limited per trigger or hook, counted once the signature holds


def refuses(*statuses: int) -> Callable[[F], F]:
    """Document problems a view answers beyond those its checks imply (404 of a missing slug, 409...)."""

    def mark(view: F) -> F:
        view.problems = statuses  # type: ignore[attr-defined]  # a mark on the view function, read by the schema
        return view

    return mark


def answers_as(media_type: str, schema: dict[str, Any]) -> Callable[[F], F]:
    """Document a view whose 200 is not a JSON model (this document, the docs page)."""

    def mark(view: F) -> F:
        view.media_type = (media_type, schema)  # type: ignore[attr-defined]  # a mark on the view function, read by the schema
        return view

    return mark


def raw_body(model: Any) -> Callable[[F], F]:
    """Document the body of a view that reads it raw (the signature covers the raw bytes)."""

    def mark(view: F) -> F:
        view.raw_body = model  # type: ignore[attr-defined]  # a mark on the view function, read by the schema
        return view

    return mark


class Document(OpenAPISchema):
    """ninja's OpenAPI document, with problems, scopes and roles (see the module docstring)."""

    def get_components(self) -> dict[str, Any]:
        from workflows.api.serializers import Problem

        self.add_named(Problem, "serialization")
        components = super().get_components()
        components["headers"] = HEADERS
        self.add_definition(components.get("schemas", {}))
        return components

    def add_definition(self, schemas: dict[str, Any]) -> None:
        """Describe `definition` properties with the core's models rather than an open object."""
        nodes = TypeAdapter(NodeSpec).json_schema(ref_template=REF_TEMPLATE)
        edges = TypeAdapter(EdgeSpec).json_schema(ref_template=REF_TEMPLATE)
        for defs in (nodes.pop("$defs", {}), edges.pop("$defs", {})):
            schemas.update(defs)
        schemas["NodeSpec"], schemas["EdgeSpec"] = nodes, edges
        schemas["Definition"] = {
            "type": "object",
            "description": "A workflow definition: its nodes, the edges between them, a description.",
            "properties": {
                "nodes": {"type": "array", "items": {"$ref": REF_TEMPLATE.format(model="NodeSpec")}},
                "edges": {"type": "array", "items": {"$ref": REF_TEMPLATE.format(model="EdgeSpec")}},
                "description": {"type": "string"},
            },
            "required": ["nodes"],
            "additionalProperties": False,
        }
        for name, schema in schemas.items():
            prop = schema.get("properties", {}).get("definition")
            if prop is not None and prop.get("type") == "object" and name not in CHECKS_ANY_DEFINITION:
                schema["properties"]["definition"] = {
                    "$ref": REF_TEMPLATE.format(model="Definition"),
                    "description": prop.get("description", "The workflow definition."),
                }

    def add_named(self, kind: Any, mode: Any) -> dict[str, Any]:
        schema = TypeAdapter(kind).json_schema(ref_template=REF_TEMPLATE, mode=mode)
        self.add_schema_definitions(schema.pop("$defs", {}))
        self.add_schema_definitions({kind.__name__: schema})
        return {"$ref": REF_TEMPLATE.format(model=kind.__name__)}

    def operation_details(self, operation: Operation) -> dict[str, Any]:
        result = super().operation_details(operation)
        view = operation.view_func
        result["description"] = result.get("description", "")
        result.setdefault("security", [])
        action = key_action(operation)
        if action is not None:
            role, scope = access.ACTIONS[action]
            result["x-scope"], result["x-role"] = scope, role
            result["description"] += (
                f"\n\nNeeds an API key with the `{scope}` scope, held by a {role} or above"
                f" (or a browser session of a {role} or above)."
            )
        if hasattr(view, "raw_body"):
            schema = self.add_named(view.raw_body, "validation")
            required = bool(view.raw_body.model_json_schema().get("required"))
            result["requestBody"] = {
                "required": required,
                "content": {"application/json": {"schema": schema}},
            }
        for status in sorted(problem_statuses(operation, result) | {405}):
            result["responses"][status] = {
                "description": PROBLEM_HELP.get(status, HTTPStatus(status).phrase),
                "content": {"application/problem+json": {"schema": PROBLEM_SCHEMA}},
            }
        for status, answer in result["responses"].items():
            names = answer_headers(result.get("operationId", ""), int(status), keyed=action is not None)
            if names:
                answer["headers"] = {name: {"$ref": f"#/components/headers/{name}"} for name in names}
        return result

    def request_body(self, operation: Operation) -> dict[str, Any]:
        result = super().request_body(operation)
        for media in result.get("content", {}).values():
            # ninja documents a body's default as allOf + default; client generators such as
            # openapi-python-client then drop the operation. Optional is said by `required`.
            schema = media["schema"]
            if "default" in schema and len(schema.get("allOf", [])) == 1:
                media["schema"] = schema["allOf"][0]
        return result

    def responses(self, operation: Operation) -> dict[int, Any]:
        result = super().responses(operation)
        special = getattr(operation.view_func, "media_type", None)
        if special is not None:
            media_type, schema = special
            result[200]["content"] = {media_type: {"schema": schema}}
        return result

    def operation_security(self, operation: Operation) -> list[dict[str, Any]] | None:
        result: list[dict[str, Any]] = []
        for auth in operation.auth_callbacks:
            name = getattr(auth, "scheme_name", type(auth).__name__)
            result.append({name: []})
            self.securitySchemes[name] = auth.openapi_security_schema  # type: ignore[attr-defined]  # ninja types auth_callbacks as callables; ours are AuthBase, which has it
        return result or None

    def _extract_parameters(self, model: Any) -> list[dict[str, Any]]:
        known = set(self.schemas)
        params = super()._extract_parameters(model)
        # ninja files the query model itself (and its enums) as components; parameters are
        # flat and inline, so those components would only be noise in generated clients.
        text = json.dumps(params)
        for name in set(self.schemas) - known:
            if REF_TEMPLATE.format(model=name) not in text:
                del self.schemas[name]
        for param in params:
            param["schema"] = not_null(param["schema"])
            if "description" in param["schema"]:
                param["description"] = param["schema"].pop("description")
        return params


def answer_headers(operation_id: str, status: int, keyed: bool) -> list[str]:
    """The headers an operation's answer with this status carries.

    The RateLimit-* trio is on every answer to a request that counted against its key's or
    person's window, errors included: a refused request (403, 404, 409, 422...) spent one of
    the window's requests like a successful one, and a client backing off or pacing a batch
    needs the remaining count most when its requests are failing. What did not count says
    nothing about the window, so carries none: a 401 (no caller known to count against) and
    a 405 (answered before the operation, and its authentication, runs), and a 503 (a store
    away: counted or not depending on where it failed the request). A signed delivery
    counts against its trigger only once its signature holds, after which it either starts
    its run (201, or 200 replaying it) or is refused for the rate (429): those carry the trio.
    """
    names = []
    if (status == 201 and operation_id not in CREATES_NO_OBJECT) or (
        status == 200 and operation_id in REPLAYED_ON
    ):
        names.append("Location")
    if operation_id in VERSION_ETAG and status in (200, 201, 412):
        names.append("ETag")
    if operation_id in REPLAYED_ON and status == 200:
        names.append("Idempotent-Replayed")
    if operation_id in STREAMS and status == 200:
        names.extend(("Cache-Control", "X-Accel-Buffering"))
    if status == 401:
        names.append("WWW-Authenticate")
    if status in (429, 503):
        names.append("Retry-After")
    if status == 405:
        names.append("Allow")
    if (keyed and status not in (401, 405, 503)) or (
        operation_id in RATED_BY_TRIGGER and status in (200, 201, 202, 429)
    ):
        names.extend(RATE_HEADERS)
    return names


def key_action(operation: Operation) -> str | None:
    return next((a.action for a in operation.auth_callbacks if isinstance(a, KeyAuth)), None)


def problem_statuses(operation: Operation, details: dict[str, Any]) -> set[int]:
    statuses = set(getattr(operation.view_func, "problems", ()))
    if details.get("operationId") not in STORELESS:
        statuses.add(503)  # PostgreSQL or Redis away (api.on_store_away)
    sources = {model.__ninja_param_source__ for model in operation.models}
    if operation.auth_callbacks:
        statuses |= {401, 403, 429}
    if "requestBody" in details:
        statuses |= {400, 413, 415, 422}
    if sources & {"query", "header"}:
        statuses.add(400)
    if "path" in sources:
        statuses.add(404)
    return statuses


def not_null(prop: dict[str, Any]) -> dict[str, Any]:
    """Drop the `null` alternative and a null default: a query parameter is absent instead."""
    prop = {k: v for k, v in prop.items() if k != "title" and not (k == "default" and v is None)}
    alternatives = [a for a in prop.pop("anyOf", []) if a.get("type") != "null"]
    if len(alternatives) == 1:
        prop.update(alternatives[0])
    elif alternatives:
        prop["anyOf"] = alternatives
    return prop


class Docs(Swagger):
    """Swagger UI from ninja's own assets (never its CDN template), above our index of the API."""

    template = "api/docs.html"

    def __init__(self) -> None:
        # validatorUrl: Swagger UI would otherwise send the document to validator.swagger.io.
        super().__init__(settings={"validatorUrl": None, "docExpansion": "none"})

    def render_page(self, request: HttpRequest, api: NinjaAPI, **kwargs: Any) -> HttpResponse:
        doc = api.get_openapi_schema()
        context = {
            "swagger_settings": json.dumps({**self.settings, "url": self.get_openapi_url(api, kwargs)}),
            "api": api,
            "add_csrf": True,
            "doc": doc,
            "operations": operations(doc),
            "problems": problems(),
        }
        return render(request, self.template, context)


def operations(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Flatten the document for the docs page's index, in document order."""
    return [
        {"method": method.upper(), "path": path, "scope": op.get("x-scope"), "role": op.get("x-role"), **op}
        for path, item in doc["paths"].items()
        for method, op in item.items()
    ]


def problems() -> list[dict[str, Any]]:
    return [
        {"status": status, "title": HTTPStatus(status).phrase, "help": text}
        for status, text in sorted(PROBLEM_HELP.items())
    ]
