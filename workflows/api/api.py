"""The `NinjaAPI` of /api/v1/: its routers, its parser, its document and its problems.

django-ninja routes, validates, documents and renders. What it is told here:
- operation ids are the views' function names (clients' function names come from them);
- the parser refuses what PostgreSQL cannot store (parsing.py);
- every refusal, ours or ninja's, is a problem document (errors.py);
- the views set Location, ETag and Idempotent-Replayed on ninja's temporal response; the
  rate-limit headers of the request's key or session go on every answer in urls.py, which
  also sees the problems and the answers the views build themselves.
"""

from __future__ import annotations

import json
import logging
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from ninja import NinjaAPI, Router
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.operation import Operation

from workflows.api import (
    auth,
    inputs,
    schema,
    views_agent,
    views_approvals,
    views_budgets,
    views_deadletters,
    views_events,
    views_forks,
    views_health,
    views_hooks,
    views_keys,
    views_llm,
    views_maps,
    views_mcp,
    views_ops,
    views_providers_health,
    views_runs,
    views_schedules,
    views_secrets,
    views_streams,
    views_suites,
    views_topics,
    views_versions,
    views_workflows,
)
from workflows.api.errors import ApiError, from_domain, from_validation, problem
from workflows.api.parsing import StrictJsonParser
from workflows.runtime import outages
from workflows.store.errors import DomainError


class Api(NinjaAPI):
    def get_openapi_operation_id(self, operation: Operation) -> str:
        return operation.view_func.__name__

    def get_openapi_schema(self, *, path_prefix: str | None = None, path_params: Any = None) -> Any:
        if path_prefix is None:
            path_prefix = self.get_root_path(path_params or {})
        return schema.Document(api=self, path_prefix=path_prefix)


api = Api(
    title="Switchyard API",
    version="1",
    description="Everything a person can do in Switchyard, over HTTP. Authenticate with "
    "`Authorization: Bearer sy_<prefix>_<secret>` (or, from the browser, the signed-in session "
    "with its CSRF token); errors are RFC 9457 problem documents.",
    urls_namespace="api-v1",
    parser=StrictJsonParser(),
    openapi_url=None,  # served by schema_view below, an operation of the document
    docs=schema.Docs(),
    docs_url=None,  # likewise docs_view
)

for module in (
    views_workflows,
    views_versions,
    views_runs,
    views_forks,
    views_maps,
    views_deadletters,
    views_ops,
    views_keys,
    views_hooks,
    views_approvals,
    views_events,
    views_health,
    views_agent,
    views_llm,
    views_streams,
    views_schedules,
    views_budgets,
    views_providers_health,
    views_secrets,
    views_topics,
    views_mcp,
    views_suites,
):
    api.add_router("", module.router)

# The document and its page are operations of the document; they live here, beside the API
# they describe (in a router module they would import this one: a cycle).
meta = Router(tags=["health and schema"])


@meta.get("/openapi.json", response={200: None}, url_name="openapi-json", summary="This OpenAPI document")
@schema.answers_as("application/json", {"type": "object"})
def schema_view(request: HttpRequest) -> HttpResponse:
    """Serve this OpenAPI document."""
    return JsonResponse(document(), json_dumps_params={"ensure_ascii": False})


@meta.get("/docs", response={200: None}, url_name="docs", summary="The API documentation page")
@schema.answers_as("text/html", {})
def docs_view(request: HttpRequest) -> HttpResponse:
    """Serve the documentation page: Swagger UI (served from here) over the same document."""
    return api.docs.render_page(request, api)


log = logging.getLogger(__name__)


@lru_cache(maxsize=1)
def document() -> dict[str, Any]:
    """Build the document once per process: the routes do not change while it runs."""
    served: dict[str, Any] = json.loads(
        json.dumps(api.get_openapi_schema())
    )  # as served: status codes are text
    return served


api.add_router("", meta)


def on_api_error(request: HttpRequest, exc: ApiError) -> HttpResponse:
    return exc.response(request)


def on_domain_error(request: HttpRequest, exc: DomainError) -> HttpResponse:
    return from_domain(exc).response(request)


def on_validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    return from_validation(exc.errors, inputs.MISSING_HEADER_STATUS).response(request)


def on_anonymous(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return auth.refuse_anonymous(request, exc).response(request)


def on_too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return problem(request, 413, f"The body is larger than {limit} bytes; send less.")


def on_not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return problem(request, 404, str(exc) or f"No API endpoint at {request.path}; see /api/v1/docs.")


def on_http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    # ninja wraps whatever the parser raises as "Cannot parse request body": ours says more.
    if isinstance(exc.__cause__, ApiError):
        return exc.__cause__.response(request)
    return problem(request, exc.status_code, str(exc))


def on_store_away(request: HttpRequest, exc: Exception) -> HttpResponse:
    """503 with Retry-After, and no rate-limit headers: whether the request was counted
    depends on where the store failed it, and a client waits Retry-After either way."""
    log.warning("%s %s: %s", request.method, request.path, exc)
    request.rate = None  # type: ignore[attr-defined]  # see auth.KeyAuth: the rate state rides on the request
    headers = {"Retry-After": str(outages.RETRY_AFTER_SECONDS)}
    return problem(request, 503, outages.unavailable(exc), headers=headers)


for kind, handler in (
    *((away, on_store_away) for away in outages.STORES_AWAY),
    (ApiError, on_api_error),
    (DomainError, on_domain_error),
    (ValidationError, on_validation_error),
    (AuthenticationError, on_anonymous),
    (RequestDataTooBig, on_too_big),
    (Http404, on_not_found),
    (HttpError, on_http_error),
):
    api.add_exception_handler(kind, handler)  # type: ignore[arg-type]  # a heterogeneous table: each handler takes its own exception type
