"""Monitoring pages (surfaces): thin views over monitoring.services and the workflows domain.

One module per page family (overview, runs, inbox, letters, manage, schedules, charts,
retention, metrics), with `guards` (roles), `filters` and `decision_form` (their forms).
"""

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxRequest(HttpRequest):
    """A page's request, for mypy: django-htmx's middleware sets `htmx` on every request."""

    htmx: HtmxDetails
