"""URLconf of /api/v1/, generated from the route table; anything else under it is a 404 problem."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import re_path
from django.views.decorators.csrf import csrf_exempt

from workflows.api.errors import problem
from workflows.api.routes import ROUTES
from workflows.api.routing import urlpatterns as generated


@csrf_exempt
def not_found(request: HttpRequest) -> HttpResponse:
    return problem(request, 404, f"No API endpoint at {request.path}; see /api/v1/docs.")


urlpatterns = [*generated(ROUTES), re_path(r"^", not_found)]
