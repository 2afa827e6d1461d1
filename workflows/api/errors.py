"""One error format for the whole API: RFC 9457 problem details (application/problem+json).

Every refusal is a problem with `type`, `title`, `status`, `detail`, `instance` and
`errors`: one entry per offending input, saying where it is (`in`: body, query, header,
path), its JSON path (`definition.nodes[2].retry.max_attempts`) and what is wrong. An entry
about a definition also carries the core's structured problem (`Issue.as_problem`): `code`,
`node`, `field` (the path inside the definition) and, for a cycle, `cycle` (its node ids),
so a program (the editor) never parses the message. `type`
points at the docs page's section on that kind of problem. Domain errors
(workflows/store/errors.py) carry their own status; their issues become `errors`. Input that
ninja's validation refuses is reported per field: a bad header first (400, or the status
the header names when it is missing: If-Match answers 428), then the query string (400),
then the body (422).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpRequest, HttpResponse, JsonResponse

from workflows.core.definition import Issue
from workflows.store.errors import DomainError
from workflows.store.texts import loc_path

CONTENT_TYPE = "application/problem+json"
DOCS_PATH = "/api/v1/docs"
# "reason: say why..." -> the message names a field of the request body.
FIELD_MESSAGE = re.compile(r"^([a-z_][a-z0-9_]*): (.+)$", re.DOTALL)


@dataclass(frozen=True)
class FieldError:
    location: str  # body, query, header, path
    path: str
    message: str
    issue: Mapping[str, Any] | None = None  # Issue.as_problem() of a definition's problem

    def as_dict(self) -> dict[str, Any]:
        return {**(self.issue or {}), "in": self.location, "path": self.path, "message": self.message}


def definition_error(issue: Issue, prefix: str = "") -> FieldError:
    """Return a definition's problem as a body error: its path under `prefix`, its structure kept."""
    return FieldError("body", join_path(prefix, issue.path), issue.message, issue.as_problem())


class ApiError(Exception):
    """A refusal to answer with a problem document."""

    def __init__(
        self,
        status: int,
        detail: str,
        errors: Iterable[FieldError] = (),
        headers: Mapping[str, str] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.errors = list(errors)
        self.headers = dict(headers or {})
        self.extra = dict(extra or {})

    def response(self, request: HttpRequest) -> HttpResponse:
        return problem(request, self.status, self.detail, self.errors, self.headers, self.extra)


def problem_type(status: int) -> str:
    return f"{DOCS_PATH}#problem-{status}"


def problem(
    request: HttpRequest,
    status: int,
    detail: str,
    errors: Sequence[FieldError] = (),
    headers: Mapping[str, str] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> HttpResponse:
    body = {
        "type": problem_type(status),
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "instance": request.path,
        "errors": [e.as_dict() for e in errors],
        **(extra or {}),
    }
    response = JsonResponse(body, status=status, content_type=CONTENT_TYPE, encoder=DjangoJSONEncoder)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def from_domain(exc: DomainError, prefix: str = "") -> ApiError:
    """Turn a domain refusal into a problem; issue paths are put under `prefix` (a body field)."""
    errors = [definition_error(issue, prefix) for issue in exc.issues]
    match = FIELD_MESSAGE.match(exc.message)
    if not errors and match and not prefix:
        errors = [FieldError("body", match[1], match[2])]
    return ApiError(exc.http_status, exc.message, errors)


def join_path(prefix: str, path: str) -> str:
    if not prefix or not path:
        return prefix or path
    return f"{prefix}{path}" if path.startswith("[") else f"{prefix}.{path}"


@contextmanager
def issues_under(prefix: str) -> Iterator[None]:
    """Report the domain's issue paths (relative to a definition) under a body field."""
    try:
        yield
    except DomainError as exc:
        if not exc.issues:
            raise
        raise from_domain(exc, prefix) from None


def from_validation(errors: Sequence[Mapping[str, Any]], missing_status: Mapping[str, int]) -> ApiError:
    """Turn ninja's validation errors (loc: source, then field path) into one problem."""
    by_source: dict[str, list[tuple[tuple[Any, ...], Mapping[str, Any]]]] = {}
    for error in errors:
        source, *rest = error["loc"]
        by_source.setdefault(source, []).append((tuple(rest), error))
    if "header" in by_source:
        (name, *_), error = by_source["header"][0]
        message = message_of(error)
        status = missing_status.get(name, 400) if error["type"] == "missing" else 400
        return ApiError(status, f"Header {name} {message}.", [FieldError("header", name, message)])
    if "path" in by_source:  # the URL converters let through only what the views take
        fields = [FieldError("path", loc_path(loc), message_of(e)) for loc, e in by_source["path"]]
        return ApiError(404, "No such object: the path names none.", fields)
    if "query" in by_source:
        # Query strings are flat: the last element names the parameter (an unknown one
        # comes under the view's parameter name, a declared one without it).
        fields = [FieldError("query", loc_path(loc[-1:]), message_of(e)) for loc, e in by_source["query"]]
        return ApiError(400, "Some query parameters are invalid.", fields)
    # Body errors are located under the view's parameter name: drop it.
    fields = [FieldError("body", loc_path(loc[1:]), message_of(e)) for loc, e in by_source.get("body", [])]
    return ApiError(422, "The request body is invalid; see errors.", fields)


def message_of(error: Mapping[str, Any]) -> str:
    if error["type"] == "missing":
        return "is required"
    if error["type"] == "extra_forbidden":
        return "is not a known field"
    return str(error["msg"]).removeprefix("Value error, ")
