from __future__ import annotations

from django.http import HttpRequest, JsonResponse


def liveness(request: HttpRequest) -> JsonResponse:
    """Answer 200 while the web process can serve requests."""
    return JsonResponse({"status": "ok"})
