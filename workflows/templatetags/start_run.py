"""The start-run dialog on any page: ``{% start_run_button slug %}`` where a run may be
started (an empty slug lets the person choose the workflow) and ``{% start_run_dialog %}``
once per page, which loads the dialog's script (static/editor/src/startrun.js) with what it
needs. Both render nothing for someone whose role may not start runs: the same rule
(``start_run`` in controlplane/access.py) the API applies to the start itself.
"""

from __future__ import annotations

from typing import Any

from django import template
from django.http import HttpRequest
from django.middleware.csrf import get_token
from django.templatetags.static import static
from django.urls import reverse
from django.utils.html import format_html, json_script
from django.utils.safestring import SafeString

from controlplane import access

register = template.Library()
RUN_ID = 999999999  # a placeholder id, replaced by the script with the new run's


def dialog_config(request: HttpRequest) -> dict[str, Any]:
    """Return the dialog's configuration: the API's root, the CSRF token, the run page's URL."""
    workflows = reverse("api-v1:list_workflows")
    return {
        "api": workflows.removesuffix("/workflows"),
        "csrfToken": get_token(request),
        "runPage": reverse("run_detail", args=[RUN_ID]).replace(str(RUN_ID), "{id}"),
    }


def may_start(context: template.Context) -> bool:
    request = context.get("request")
    return request is not None and access.can(request.user, "start_run")


@register.simple_tag(takes_context=True)
def start_run_button(context: template.Context, slug: str = "", label: str = "Start run") -> SafeString:
    """A button opening the dialog for the workflow `slug` (or a choice of workflow)."""
    if not may_start(context):
        return SafeString("")
    return format_html(
        '<button type="button" class="btn start-run" data-start-run="{}">{}</button>', slug, label
    )


@register.simple_tag(takes_context=True)
def start_run_dialog(context: template.Context) -> SafeString:
    """The dialog's configuration and script, for the buttons of this page."""
    if not may_start(context):
        return SafeString("")
    config = json_script(dialog_config(context["request"]), "start-run-config")
    return format_html(
        '<link rel="stylesheet" href="{}">{}<script type="module" src="{}"></script>',
        static("editor/dist/startrun-page.css"),
        config,
        static("editor/dist/startrun-page.js"),
    )
