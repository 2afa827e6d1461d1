"""How the API reads what it is sent: ninja's `Parser` with the checks PostgreSQL needs.

django-ninja turns bodies and query strings into the pydantic models of inputs.py; this
parser is the one place it reads the raw request. On top of ninja's `json.loads` it
refuses (with our problem documents) what would otherwise reach the database or the
engine: a body that is not application/json (415), JSON that is not JSON to anyone but
Python (NaN, Infinity, numbers beyond a float), NUL characters and lone surrogates
PostgreSQL cannot store, and the same in query strings. An empty body is `{}`.

Path ids go through the `id` converter: a positive id that fits a bigint, so no URL can
make a query overflow; anything else under an id is no URL of ours (404).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.urls import register_converter
from django.utils.datastructures import MultiValueDict
from ninja.parser import Parser

from workflows.api.errors import ApiError, FieldError
from workflows.store.texts import first_bad_text, is_text, loc_path, parse_json

MAX_ID = 10**18 - 1  # fits Postgres bigint; longer digit strings are no id of ours


class IdConverter:
    """Match a positive database id (at most 18 digits), so no id overflows a bigint."""

    regex = "[1-9][0-9]{0,17}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(value)


register_converter(IdConverter, "id")


class StrictJsonParser(Parser):
    """Read JSON bodies and query strings, refusing what PostgreSQL or the engine cannot take."""

    def parse_body(self, request: HttpRequest) -> Any:
        raw = request.body
        return decode_body(request, raw) if raw.strip() else {}

    def parse_querydict(
        self, data: MultiValueDict[str, Any], list_fields: list[str], request: HttpRequest
    ) -> dict[str, Any]:
        bad = [name for name, values in data.lists() if not all(map(is_text, [name, *values]))]
        if bad:
            raise ApiError(
                400,
                "Query parameters must be text without NUL characters.",
                [FieldError("query", name, "contains a NUL or an unpaired surrogate") for name in bad],
            )
        return super().parse_querydict(data, list_fields, request)


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
        data = parse_json(raw)
    except ValueError as exc:
        detail = f"The body is not valid JSON: {exc}."
        raise ApiError(400, detail, [FieldError("body", "", detail)]) from None
    bad = first_bad_text(data)
    if bad is not None:
        message = "must not contain NUL characters or unpaired surrogates"
        where = loc_path(bad)
        raise ApiError(422, f"{where or 'The body'} {message}.", [FieldError("body", where, message)])
    return data
