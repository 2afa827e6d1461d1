"""The route table's vocabulary and the one dispatcher every API endpoint goes through.

An endpoint is described once, as a `Route` of `Op`s (workflows/api/routes.py): method,
view, the access action it needs, its body and query models (pydantic), the headers it
reads and what it answers. The URLconf and the OpenAPI document are both generated from
that table, so the served schema cannot drift from the served endpoints.

The dispatcher does, for every request: pick the op by method (405 otherwise), authenticate
the key, count it against the rate limit, authorize the action, read and validate the body
and the query string, then call the view with a `Call`. Views stay thin: one call into the
domain and a serializer. Refusals from anywhere become problem documents (errors.py).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path as django_path
from django.urls import register_converter
from django.views.decorators.csrf import csrf_exempt
from pydantic import BaseModel, ValidationError

from workflows.api import auth
from workflows.api.errors import ApiError, FieldError, from_domain, loc_path, problem
from workflows.errors import DomainError
from workflows.models import ApiKey

MAX_ID = 10**18 - 1  # fits Postgres bigint; longer digit strings are no id of ours


class IdConverter:
    """Match a positive database id (at most 18 digits), so no id overflows a bigint."""

    regex = "[1-9][0-9]{0,17}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(value)


register_converter(IdConverter, "id")


@dataclass(frozen=True)
class Header:
    """A request header an op reads, for the schema and for validation."""

    name: str
    description: str
    max_length: int = 200
    pattern: str = r"[\x21-\x7e]+"  # visible ASCII, no spaces
    rule: str = "must be 1 to 200 visible ASCII characters, without spaces"
    required: bool = False
    missing_status: int = 400  # If-Match answers 428 Precondition Required


@dataclass(frozen=True)
class Op:
    method: str
    view: Callable[..., HttpResponse]
    summary: str
    tag: str
    action: str | None  # a key of access.ACTIONS; None: no API key (health, docs, signed hooks)
    responses: Mapping[int, Any] = field(default_factory=dict)  # status -> type, or None: no body
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    headers: tuple[Header, ...] = ()
    errors: tuple[int, ...] = ()  # problems beyond those the dispatcher itself may answer
    raw_body: bool = False  # keep the body as bytes and parse it in the view (signed hooks)
    media_type: str = "application/json"


@dataclass(frozen=True)
class Route:
    path: str  # Django path syntax, relative to /api/v1/
    name: str
    ops: tuple[Op, ...]


@dataclass
class Call:
    """What a view gets: the request, the key that made it, and the validated input."""

    request: HttpRequest
    key: ApiKey | None
    body: Any = None
    query: Any = None
    raw: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


def urlpatterns(routes: list[Route]) -> list[Any]:
    return [django_path(route.path, endpoint(route), name=route.name) for route in routes]


def endpoint(route: Route) -> Callable[..., HttpResponse]:
    ops = {op.method: op for op in route.ops}
    allow = ", ".join(ops)

    @csrf_exempt
    def view(request: HttpRequest, **kwargs: Any) -> HttpResponse:
        op = ops.get(request.method or "")
        if op is None:
            detail = f"{request.method} is not allowed here; use {allow}."
            return problem(request, 405, detail, headers={"Allow": allow})
        try:
            return dispatch(op, request, kwargs)
        except ApiError as exc:
            return exc.response(request)
        except DomainError as exc:
            return from_domain(exc).response(request)

    view.__name__ = route.name
    return view


def dispatch(op: Op, request: HttpRequest, kwargs: dict[str, Any]) -> HttpResponse:
    call = Call(request, None)
    rate = None
    if op.action is not None:
        call.key = auth.authenticate(request)
        rate = auth.check_rate(f"key:{call.key.prefix}")
        auth.authorize(call.key, op.action)
    call.headers = read_headers(request, op.headers)
    call.query = read_query(request, op.query)
    if op.body is not None:
        call.raw = read_body(request)
        if not op.raw_body:
            call.body = parse_body(request, call.raw, op.body)
    response = op.view(call, **kwargs)
    for name, value in (rate.headers() if rate else {}).items():
        response[name] = value
    return response


def read_headers(request: HttpRequest, declared: tuple[Header, ...]) -> dict[str, str]:
    values: dict[str, str] = {}
    for header in declared:
        value = request.headers.get(header.name)
        if value is None:
            if header.required:
                raise bad_header(header.name, "is required", header.missing_status)
            continue
        if len(value) > header.max_length or not re.fullmatch(header.pattern, value):
            raise bad_header(header.name, header.rule)
        values[header.name] = value
    return values


def bad_header(name: str, message: str, status: int = 400) -> ApiError:
    return ApiError(status, f"Header {name} {message}.", [FieldError("header", name, message)])


def read_query(request: HttpRequest, model: type[BaseModel] | None) -> Any:
    params = {name: request.GET[name] for name in request.GET}
    if model is None:
        return None
    bad = [name for name, value in params.items() if not is_text(value)]
    if bad:
        raise ApiError(
            400,
            "Query parameters must be text without NUL characters.",
            [FieldError("query", name, "contains a NUL or an unpaired surrogate") for name in bad],
        )
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        errors = [FieldError("query", loc_path(e["loc"]), message_of(e)) for e in exc.errors()]
        raise ApiError(400, "Some query parameters are invalid.", errors) from None


def read_body(request: HttpRequest) -> bytes:
    try:
        return request.body
    except RequestDataTooBig:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raise ApiError(413, f"The body is larger than {limit} bytes; send less.") from None


def parse_body(request: HttpRequest, raw: bytes, model: type[BaseModel]) -> Any:
    """Decode a JSON body and validate it against the op's model (an empty body is `{}`)."""
    if raw.strip():
        decode_body(request, raw)  # syntax, NaN, NUL: refused with our own messages first
    try:
        # JSON mode, strict: JSON types as they are ("1" is not 1), datetimes from RFC 3339 text.
        return model.model_validate_json(raw if raw.strip() else b"{}", strict=True)
    except ValidationError as exc:
        errors = [FieldError("body", loc_path(e["loc"]), message_of(e)) for e in exc.errors()]
        raise ApiError(422, "The request body is invalid; see errors.", errors) from None


def decode_body(request: HttpRequest, raw: bytes) -> Any:
    """Return the JSON value of a body sent as application/json."""
    if not is_json_type(request.content_type or ""):
        raise ApiError(415, f"Send the body as application/json, not {request.content_type or 'untyped'}.")
    return decode_json(raw)


def is_json_type(content_type: str) -> bool:
    return content_type == "application/json" or content_type.endswith("+json")


def decode_json(raw: bytes) -> Any:
    """Parse JSON, refusing NaN/Infinity, numbers too big for a float, NUL characters and lone surrogates."""
    try:
        data = json.loads(raw, parse_constant=refuse_constant, parse_float=finite_float)
    except (ValueError, RecursionError) as exc:
        detail = (
            f"The body is not valid JSON: {exc}."
            if not isinstance(exc, RecursionError)
            else ("The body is not valid JSON: nested too deeply.")
        )
        raise ApiError(400, detail, [FieldError("body", "", detail)]) from None
    bad = first_bad_text(data)
    if bad is not None:
        message = "must not contain NUL characters or unpaired surrogates"
        raise ApiError(422, f"{bad or 'The body'} {message}.", [FieldError("body", bad, message)])
    return data


def refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is too large")
    return value


def is_text(value: str) -> bool:
    if "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def first_bad_text(data: Any) -> str | None:
    """Return the JSON path of the first key or string PostgreSQL cannot store, else None."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), data)]
    while stack:
        loc, value = stack.pop()
        if isinstance(value, str) and not is_text(value):
            return loc_path(loc)
        if isinstance(value, dict):
            for key, item in value.items():
                if not is_text(key):
                    return loc_path(loc)
                stack.append(((*loc, key), item))
        elif isinstance(value, list):
            stack.extend(((*loc, index), item) for index, item in enumerate(value))
    return None


def message_of(error: Any) -> str:
    if error["type"] == "missing":
        return "is required"
    if error["type"] == "extra_forbidden":
        return "is not a known field"
    return str(error["msg"]).removeprefix("Value error, ")


def render(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> HttpResponse:
    """Answer JSON (datetimes as RFC 3339); `data` is what a serializer returned."""
    response = JsonResponse(data, status=status, safe=False, encoder=DjangoJSONEncoder)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def no_content() -> HttpResponse:
    return HttpResponse(status=204)
